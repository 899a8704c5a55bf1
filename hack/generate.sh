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
# ENGINE is the engine binary, bin/engine by default.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=$(cd "${1:?usage: hack/generate.sh OUTPUT_ROOT}" && pwd)
engine=${ENGINE:-$root/bin/engine}
cd "$root"

mkdir -p "$out/config"
# Through a temporary file, so that a failure leaves no truncated file behind.
"$engine" crds --templates examples/templates > "$out/config/crds.yaml.tmp"
mv "$out/config/crds.yaml.tmp" "$out/config/crds.yaml"
"$engine" rbac --templates examples/templates --install-crds > "$out/config/rbac.yaml.tmp"
mv "$out/config/rbac.yaml.tmp" "$out/config/rbac.yaml"
rm -rf "$out/config/templates"
cp -R examples/templates "$out/config/templates"
rm -rf "$out/config/templates/tests"
