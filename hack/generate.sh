#!/usr/bin/env bash
# Writes the files of config/ that are generated from examples/templates, under
# the directory given: the repository root for `make generate`, a scratch
# directory for `make verify`.
#
#   config/crds.yaml    engine crds
#   config/rbac.yaml    engine rbac --install-crds
#   config/templates/   a copy of examples/templates without its tests/ (the
#                       cases of engine test): kustomize reads files only from
#                       inside config/, a ConfigMap holds no subdirectories,
#                       and the engine never reads tests/
#
# and the same for the Helm chart, which reads files only from inside
# charts/engine/ (its default values deploy the example templates):
#
#   charts/engine/crds/crds.yaml         engine crds
#   charts/engine/files/rbac.yaml        engine rbac --install-crds (the chart
#                                        takes the ClusterRole's rules from it)
#   charts/engine/files/templates/       as config/templates/
#   charts/engine/files/monitoring/      a copy of config/components/monitoring's
#                                        dashboard and PrometheusRule
#
# and the schemas of the built-in Kubernetes kinds that templates' children
# are checked against (hack/tools/k8sschemas, from the k8s.io/kubernetes of
# hack/tools/go.mod; a few minutes to compile the first time):
#
#   templates/openapi/builtin.json.gz
#
# ENGINE is the engine binary, bin/engine by default.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=$(cd "${1:?usage: hack/generate.sh OUTPUT_ROOT}" && pwd)
engine=${ENGINE:-$root/bin/engine}
cd "$root"

# write FILE COMMAND...: the command's output, through a temporary file, so
# that a failure leaves no truncated file behind.
write() {
  local file=$1
  shift
  mkdir -p "$(dirname "$file")"
  "$@" > "$file.tmp"
  mv "$file.tmp" "$file"
}

# copy_templates DIR: the example templates without their test cases.
copy_templates() {
  rm -rf "$1"
  mkdir -p "$(dirname "$1")"
  cp -R examples/templates "$1"
  rm -rf "$1/tests"
}

write "$out/config/crds.yaml" "$engine" crds --templates examples/templates
write "$out/config/rbac.yaml" "$engine" rbac --templates examples/templates --install-crds
copy_templates "$out/config/templates"

chart=$out/charts/engine
write "$chart/crds/crds.yaml" "$engine" crds --templates examples/templates
write "$chart/files/rbac.yaml" "$engine" rbac --templates examples/templates --install-crds
copy_templates "$chart/files/templates"
rm -rf "$chart/files/monitoring"
mkdir -p "$chart/files/monitoring"
cp config/components/monitoring/engine-dashboard.json config/components/monitoring/prometheusrule.yaml "$chart/files/monitoring/"

mkdir -p "$out/templates/openapi"
(cd hack/tools && go run ./k8sschemas "$out/templates/openapi/builtin.json.gz.tmp")
mv "$out/templates/openapi/builtin.json.gz.tmp" "$out/templates/openapi/builtin.json.gz"
