#!/usr/bin/env bash
# hack/imports_test.sh: the self-test of hack/imports.sh (make verify runs
# it). It feeds the checker made-up go list output: a tree that follows every
# rule must pass, and each broken rule must fail naming the offending import.
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
m=github.com/cuengine/engine
failed=0

# A tree that follows the rules, with packages that do not exist today:
# pkg|imports|test imports.
clean="$m/contract|fmt strings|testing
$m/templates|$m/contract $m/templates/openapi $m/templates/graph $m/templates/reads $m/templates/policy cuelang.org/go/cue|$m/internal/localcluster testing
$m/templates/openapi|$m/contract cuelang.org/go/cue|$m/templates testing
$m/templates/policy|$m/contract cuelang.org/go/cue|$m/templates testing
$m/templates/graph|cuelang.org/go/cue/ast|testing
$m/templates/reads|cuelang.org/go/cue/ast|$m/templates testing
$m/templates/crdcompat|fmt|$m/templates testing
$m/templates/watch|$m/templates github.com/fsnotify/fsnotify|
$m/templates/rbac|$m/templates|
$m/providers|context|
$m/providers/gcs|$m/providers net/http|$m/providers testing
$m/render|$m/templates $m/templates/openapi $m/contract|
$m/revisions|$m/templates $m/contract|
$m/reconciler|$m/render $m/revisions $m/providers $m/templates $m/templates/graph $m/contract|
$m/rollout|$m/render $m/revisions $m/templates $m/contract|
$m/diff|$m/render $m/revisions $m/templates $m/contract|
$m/sharding|$m/contract hash/fnv|$m/contract testing
$m/engine|$m/templates $m/providers $m/reconciler $m/rollout $m/sharding|$m/engine $m/internal/localcluster testing
$m/internal/gcsemulator|$m/providers/gcs|
$m/internal/localcluster|os/exec|
$m/cmd/engine|$m/engine $m/templates $m/templates/graph $m/templates/watch $m/templates/rbac $m/providers/plugin $m/internal/localcluster|$m/engine
$m/cmd/engine-provider-gcs|$m/providers $m/providers/gcs $m/providers/plugin|
$m/bench/harness|$m/engine $m/sharding|
$m/e2e||$m/internal/localcluster $m/templates
$m/hack/tool|$m/templates|"

# check NAME WANT LISTING [EXPECTED-OUTPUT]: runs the checker on LISTING and
# fails the self-test unless it exits WANT (0 passes, 1 fails) and, when
# given, prints EXPECTED-OUTPUT.
check() {
  local name=$1 want=$2 listing=$3 expected=${4:-} got=0
  printf '%s\n' "$listing" >"$tmp/listing"
  bash ./imports.sh "$tmp/listing" >"$tmp/out" 2>&1 || got=$?
  if [ "$got" != "$want" ]; then
    echo "imports_test: $name: hack/imports.sh exited $got, want $want; it printed:"
    sed 's/^/    /' "$tmp/out"
    failed=1
  elif [ -n "$expected" ] && ! grep -qF -- "$expected" "$tmp/out"; then
    echo "imports_test: $name: hack/imports.sh did not print \"$expected\"; it printed:"
    sed 's/^/    /' "$tmp/out"
    failed=1
  fi
}

check "a tree following the rules" 0 "$clean" "imports: 25 packages follow the rules"
check "no package of ours" 0 "fmt|os|"

# Each broken rule, added to the clean tree: name;pkg|imports|test imports;expected output.
cases=0
while IFS=';' read -r name line expected; do
  cases=$((cases + 1))
  check "$name" 1 "$clean
$line" "$expected"
done <<EOF
sharding imports engine (today's);$m/sharding|$m/contract $m/engine|;sharding imports engine ($m/engine): sharding may import only: contract
contract imports one of ours;$m/contract|$m/templates|;contract imports templates ($m/templates): contract may import nothing of ours
templates imports watch;$m/templates|$m/contract $m/templates/watch|;templates imports templates/watch ($m/templates/watch): templates may import only: templates/openapi templates/graph templates/reads templates/policy contract
templates imports rbac;$m/templates|$m/templates/rbac|;templates imports templates/rbac
openapi imports templates;$m/templates/openapi|$m/contract $m/templates|;templates/openapi imports templates ($m/templates): templates/openapi may import only: contract (rule "templates/openapi")
graph imports templates;$m/templates/graph|$m/templates|;templates/graph imports templates ($m/templates): templates/graph may import nothing of ours (rule "templates/graph")
reads imports openapi;$m/templates/reads|$m/templates/openapi|;templates/reads imports templates/openapi ($m/templates/openapi): templates/reads may import nothing of ours
policy imports templates;$m/templates/policy|$m/contract $m/templates|;templates/policy imports templates ($m/templates): templates/policy may import only: contract (rule "templates/policy")
policy imports render;$m/templates/policy|$m/render|;templates/policy imports render ($m/render)
openapi imports graph;$m/templates/openapi|$m/contract $m/templates/graph|;templates/openapi imports templates/graph ($m/templates/graph)
render imports graph;$m/render|$m/templates $m/templates/graph|;render imports templates/graph ($m/templates/graph)
crdcompat imports one of ours;$m/templates/crdcompat|$m/contract|;templates/crdcompat imports contract ($m/contract): templates/crdcompat may import nothing of ours
watch imports render;$m/templates/watch|$m/templates $m/render|;templates/watch imports render ($m/render): templates/watch may import only: templates
rbac imports openapi;$m/templates/rbac|$m/templates $m/templates/openapi|;templates/rbac imports templates/openapi
templates imports providers;$m/templates|$m/contract $m/providers|;templates imports providers ($m/providers)
providers/gcs imports templates;$m/providers/gcs|$m/providers $m/templates|;providers/gcs imports templates
providers imports contract;$m/providers|$m/contract|;providers imports contract
render imports diff;$m/render|$m/templates $m/diff|;render imports diff
revisions imports render;$m/revisions|$m/render|;revisions imports render
rollout imports reconciler;$m/rollout|$m/render $m/reconciler|;rollout imports reconciler ($m/reconciler)
reconciler imports rollout;$m/reconciler|$m/render $m/rollout|;reconciler imports rollout ($m/rollout)
the engine binary imports a provider;$m/cmd/engine|$m/engine $m/providers/gcs|;cmd/engine imports providers/gcs ($m/providers/gcs)
reconciler imports a provider;$m/reconciler|$m/providers $m/providers/gcs|;reconciler imports providers/gcs ($m/providers/gcs): reconciler may import only: render revisions providers templates templates/policy templates/graph contract
diff imports engine;$m/diff|$m/render $m/engine|;diff imports engine
internal imports engine;$m/internal/gcsemulator|$m/providers/gcs $m/engine|;internal/gcsemulator imports engine ($m/engine): only engine cmd/... bench/... e2e/... may
an unlisted package imports engine;$m/newpkg|$m/engine|;newpkg imports engine
a package's tests import engine;$m/templates|$m/contract|$m/engine;the tests of templates import engine ($m/engine)
both tests of a package import engine, reported once;$m/templates|$m/contract|$m/engine $m/engine;imports: 1 import(s) break the rules
EOF

if ((failed)); then
  echo "imports_test: hack/imports.sh no longer enforces the rules it says it does"
  exit 1
fi
echo "imports_test: hack/imports.sh passes a clean tree and catches $cases broken rules"
