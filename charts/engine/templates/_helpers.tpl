{{/* The chart's name: app.kubernetes.io/name of every object. */}}
{{- define "engine.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The objects' name: the release's name when it contains the chart's (so
`helm install engine` gives the names of config/: engine, engine-templates,
engine-metrics), otherwise <release>-engine.
*/}}
{{- define "engine.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "engine.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "engine.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* The labels of every object. */}}
{{- define "engine.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "engine.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The labels that select the engine's pods. */}}
{{- define "engine.selectorLabels" -}}
app.kubernetes.io/name: {{ include "engine.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "engine.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "engine.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The template files by path under /templates, as YAML: templates.files, or
the chart's copy of examples/templates.
*/}}
{{- define "engine.templateFiles" -}}
{{- $files := dict }}
{{- if .Values.templates.files }}
{{- range $path, $content := .Values.templates.files }}
{{- $_ := set $files $path $content }}
{{- end }}
{{- else }}
{{- range $path, $_ := .Files.Glob "files/templates/**" }}
{{- $_ := set $files (trimPrefix "files/templates/" $path) ($.Files.Get $path) }}
{{- end }}
{{- end }}
{{- toYaml $files }}
{{- end }}

{{/*
GOMEMLIMIT: nine tenths of the container's memory limit, in MiB, when
resources.limits.memory is given in Mi or Gi; empty otherwise (the
Deployment then sets none, and the engine takes nine tenths of the limit
its cgroup reports, --memory-limit-ratio).
*/}}
{{- define "engine.goMemLimit" -}}
{{- $mem := toString (dig "limits" "memory" "" (.Values.resources | default dict)) -}}
{{- if regexMatch "^[0-9]+(Mi|Gi)$" $mem -}}
{{- $mib := regexFind "^[0-9]+" $mem | atoi -}}
{{- if hasSuffix "Gi" $mem }}{{ $mib = mul $mib 1024 }}{{ end -}}
{{- printf "%dMiB" (div (mul $mib 9) 10) -}}
{{- end -}}
{{- end -}}
