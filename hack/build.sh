#!/usr/bin/env bash
# Builds the engine and its plugins into bin/, saying what it compiles and
# how long it took: the first build on a fresh machine compiles every
# dependency (Kubernetes, CUE, gRPC, the cloud SDK), which is minutes of
# silence without a heartbeat.
#   hack/build.sh BIN LDFLAGS
set -euo pipefail
bin=$1
ldflags=$2
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

stamp() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

cmds=(engine engine-provider-gcs engine-provider-postgresql engine-gcs-emulator)
start=$(date +%s)
stamp "compiling ${cmds[*]} into $bin (about 6 minutes the first time on 2 cores, seconds after)..."
# A heartbeat so a long compile never looks hung.
( while sleep 30; do stamp "   still compiling, $(( $(date +%s) - start ))s so far"; done ) &
beat=$!
trap 'kill $beat 2>/dev/null || true' EXIT
pkgs=()
for c in "${cmds[@]}"; do pkgs+=("./cmd/$c"); done
${GO:-go} build -trimpath -ldflags "$ldflags" -o "$bin/" "${pkgs[@]}"
kill $beat 2>/dev/null || true
wait $beat 2>/dev/null || true
stamp "built ${cmds[*]} in $(( $(date +%s) - start ))s"
