#!/usr/bin/env bash
# hack/imports.sh: fails when a package of this module imports one of ours
# that the table below does not allow (make verify runs it; seconds, no cluster).
#
#   hack/imports.sh            check ./... as go list sees it
#   hack/imports.sh FILE       check FILE instead, lines of
#                              "pkg|imports|test imports" as go list -f prints
#                              them below (hack/imports_test.sh feeds it so)
#
# The rules. Package paths are relative to the module; "a/..." is a and every
# package below it. A package's non-test imports of ours must be in its line:
# "-" allows none, "*" any. The first line that matches a package is its
# rule; a package no line matches may import anything of ours, and a line for
# a package that does not exist (yet) is simply unused.
#
# templates/ by job: openapi (CUE<->OpenAPI, the schemas of child kinds,
# what the CRD cannot carry), graph (the dependency graph, from the
# syntax), reads (what a template reads of parent and observed, from the
# syntax) and crdcompat (breaking CRD changes) sit below templates, which
# imports openapi, graph and reads for the CRD, the child check, the graph
# and evaluation; watch (hot reload) and rbac (engine rbac) sit above it
# and read compiled templates. So nothing runs back up: openapi, graph,
# reads and crdcompat never import templates (graph and reads nothing of
# ours: they read syntax alone), and templates never imports watch or rbac.
# policy (the policy and rollout blocks decoded, and the types the
# reconciler, render, revisions and rollout read of them) sits below
# templates too and imports only contract.
# The reconciler and engine graph read a template's graph (templates/graph).
RULES='
contract            -
internal/jsonhash   -
internal/jsoncmp    -
templates/openapi   contract
templates/policy    contract
templates/graph     -
templates/reads     -
templates/crdcompat -
templates/watch     templates
templates/rbac      templates templates/policy
templates           templates/openapi templates/graph templates/reads templates/policy contract internal/jsonhash
providers/...       providers/...
evaluator           templates
render              evaluator templates templates/openapi templates/policy contract internal/jsonhash
revisions       templates templates/policy contract
reconciler      render revisions providers templates templates/policy templates/graph contract internal/jsonhash internal/jsoncmp
rollout         render revisions templates templates/policy contract rollout/analysis
rollout/analysis templates/policy
diff            render revisions templates providers contract
sharding        contract
clusters        contract
migration       -
webhooks        templates render evaluator contract
engine          *
internal/...    *
cmd/engine      engine clusters contract templates templates/openapi templates/policy templates/graph templates/rbac templates/watch render evaluator revisions reconciler rollout rollout/analysis diff sharding webhooks providers providers/plugin internal/localcluster internal/pgserver
'
# The engine binary runs its providers as plugins (engine-provider-<name>,
# providers/plugin): it links no provider implementation, directly or not
# (checked on go list -deps ./cmd/engine; a provider is providers/<name>).
BINARY=cmd/engine
# No package of ours the engine binary links imports client-go's whole
# typed clientset or its informer factory: calling kubernetes.NewForConfig once
# keeps every typed client of every API group, with their apply
# configurations, and the factory every typed informer and lister (6.7 MB of
# the binary's 38 MB of code; docs/benchmarks.md). A group's own client
# (k8s.io/client-go/kubernetes/typed/<group>/<version>), the discovery
# client and cache.NewSharedIndexInformer do the same jobs.
WHOLE_CLIENT='k8s.io/client-go/kubernetes k8s.io/client-go/informers'
# And nothing imports engine, in its code or its tests, but these (and
# engine's own external tests): internal/... may not either.
ENGINE=engine
ENGINE_IMPORTERS='engine cmd/... bench/... e2e/...'
set -euo pipefail
set -f # the rules hold "*", not file names

module=github.com/cuengine/engine

# matches PATTERN PKG: whether PKG is PATTERN, or below it for "a/...".
matches() {
  local pattern=$1 pkg=$2
  if [[ $pattern == */... ]]; then
    [[ $pkg == "${pattern%/...}" || $pkg == "${pattern%...}"* ]]
  else
    [[ $pkg == "$pattern" ]]
  fi
}

# allowed_by PATTERNS PKG: whether PKG matches one of the space-separated PATTERNS.
allowed_by() {
  local p
  for p in $1; do
    if matches "$p" "$2"; then return 0; fi
  done
  return 1
}

# ours IMPORT: prints IMPORT relative to the module, if it is one of ours.
ours() {
  case $1 in
    "$module") echo . ;;
    "$module"/*) echo "${1#"$module"/}" ;;
  esac
}

mapfile -t rule_lines < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' <<<"$RULES")

# rule_for PKG: prints the allowed imports of PKG's rule; fails when no line matches.
rule_for() {
  local line pattern allowed
  for line in "${rule_lines[@]}"; do
    read -r pattern allowed <<<"$line"
    if matches "$pattern" "$1"; then
      echo "$pattern|$allowed"
      return 0
    fi
  done
  return 1
}

if (($# > 0)); then
  listing=$(cat "$1")
else
  cd "$(dirname "$0")/.."
  listing=$(go list -f '{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}' ./...) || {
    echo "imports: go list ./... failed (above); the import rules were not checked" >&2
    exit 1
  }
fi

violations=()
declare -A flagged # "pkg dep" reported by the table, "tests pkg" by the engine rule
checked=0
while IFS='|' read -r path imports testimports; do
  [ -n "$path" ] || continue
  pkg=$(ours "$path")
  [ -n "$pkg" ] || continue
  checked=$((checked + 1))

  if rule=$(rule_for "$pkg"); then
    pattern=${rule%%|*}
    allowed=${rule#*|}
    for imp in $imports; do
      dep=$(ours "$imp")
      [ -n "$dep" ] || continue
      case $allowed in
        '*') continue ;;
        -) ;;
        *) if allowed_by "$allowed" "$dep"; then continue; fi ;;
      esac
      if [ "$allowed" = - ]; then
        may="nothing of ours"
      else
        may="only: $allowed"
      fi
      violations+=("$pkg imports $dep ($imp): $pkg may import $may (rule \"$pattern\")")
      flagged[$pkg $dep]=1
    done
  fi

  if ! allowed_by "$ENGINE_IMPORTERS" "$pkg"; then
    for imp in $imports; do
      if [ "$(ours "$imp")" = "$ENGINE" ] && [ -z "${flagged[$pkg $ENGINE]:-}" ]; then
        violations+=("$pkg imports $ENGINE ($imp): only $ENGINE_IMPORTERS may")
      fi
    done
    for imp in $testimports; do
      # Once, though its internal and external tests may both import it.
      if [ "$(ours "$imp")" = "$ENGINE" ] && [ -z "${flagged[tests $pkg]:-}" ]; then
        violations+=("the tests of $pkg import $ENGINE ($imp): only $ENGINE_IMPORTERS may")
        flagged[tests $pkg]=1
      fi
    done
  fi
done <<<"$listing"

if (($# == 0)); then
  while read -r dep; do
    pkg=$(ours "$dep")
    if [[ $pkg == providers/* && $pkg != providers/plugin && $pkg != providers/*/* ]]; then
      violations+=("$BINARY links the provider $pkg: providers run as plugins, engine-provider-<name> (providers/plugin)")
    fi
  done < <(go list -deps "./$BINARY")
  while IFS='|' read -r path imports; do
    pkg=$(ours "$path")
    [ -n "$pkg" ] || continue
    for imp in $imports; do
      if allowed_by "$WHOLE_CLIENT" "$imp"; then
        violations+=("$pkg imports $imp and $BINARY links it: use the API group's own client (k8s.io/client-go/kubernetes/typed/...), the discovery client or cache.NewSharedIndexInformer")
      fi
    done
  done < <(go list -deps -f '{{.ImportPath}}|{{join .Imports " "}}' "./$BINARY")
fi

if ((${#violations[@]} > 0)); then
  echo "imports: ${#violations[@]} import(s) break the rules at the top of hack/imports.sh:"
  printf '  %s\n' "${violations[@]}"
  exit 1
fi
echo "imports: $checked packages follow the rules of hack/imports.sh"
