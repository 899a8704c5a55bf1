#!/usr/bin/env bash
# make verify: fails when a generated file of config/ or charts/engine/ is not
# what hack/generate.sh writes from examples/templates today, when Go code is
# not gofmt-ed, when go.mod or go.sum is not what `go mod tidy` writes, or when
# a package imports one of ours that hack/imports.sh does not allow. It takes seconds, needs no cluster and changes nothing in the tree.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

hack/generate.sh "$tmp"
stale=()
for generated in "$tmp"/config/* "$tmp"/charts/engine/*/* "$tmp"/templates/openapi/*; do
  f=${generated#"$tmp"/}
  if [ ! -e "$f" ]; then
    stale+=("$f (missing)")
    continue
  fi
  # One line per differing file, relative to the repository.
  mapfile -t -O "${#stale[@]}" stale < <(diff -rq "$generated" "$f" | sed \
    -e 's|^Files .* and \(.*\) differ$|\1|' \
    -e "s|^Only in $tmp/\\(.*\\): \\(.*\\)$|\\1/\\2 (missing)|" \
    -e 's|^Only in \(.*\): \(.*\)$|\1/\2 (not generated)|')
done
if ((${#stale[@]} > 0)); then
  echo "verify: generated files are out of date; run \`make generate\` and commit:"
  printf '  %s\n' "${stale[@]}"
  failed=1
fi

# Tracked and new Go files, without those deleted from the working tree.
mapfile -t gofiles < <(git ls-files --cached --others --exclude-standard --deduplicate '*.go')
existing=()
for f in "${gofiles[@]}"; do
  if [ -e "$f" ]; then existing+=("$f"); fi
done
mapfile -t unformatted < <(gofmt -l "${existing[@]}")
if ((${#unformatted[@]} > 0)); then
  echo "verify: Go files are not gofmt-ed; run \`make fmt\`:"
  printf '  %s\n' "${unformatted[@]}"
  failed=1
fi

# go.mod and go.sum as `go mod tidy` leaves them (-diff changes nothing).
if ! tidy=$(go mod tidy -diff 2>&1); then
  echo "verify: go.mod or go.sum is not tidy; run \`go mod tidy\` and commit:"
  printf '%s\n' "$tidy" | sed 's/^/  /'
  failed=1
fi

# The import rules (the table at the top of hack/imports.sh), after the
# self-test that shows the checker still catches a broken rule.
hack/imports_test.sh || failed=1
hack/imports.sh || failed=1
exit "$failed"
