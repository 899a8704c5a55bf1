#!/usr/bin/env bash
# make image: builds the engine's image without Docker and without a network,
# with podman (installed and set up by hack/podman.sh where missing), FROM
# scratch: the root filesystem of hack/image/rootfs.sh under the layout of
# hack/image/Containerfile, which the Dockerfile shares. Writes, under
# bin/image/:
#
#   engine-VERSION.oci.tar     the image as an OCI archive (podman load, skopeo copy)
#   BINARY-VERSION.cdx.json    the software bill of materials of each of the
#                              image's binaries, the engine and its provider
#                              plugins (CycloneDX: the modules linked into it,
#                              read from its build information by cyclonedx-gomod)
#
# The tag is IMAGE:VERSION, by default ghcr.io/cuengine/engine and the chart's
# appVersion (charts/engine/Chart.yaml), which the chart and config/ deploy.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
IMAGE=${IMAGE:-ghcr.io/cuengine/engine}
VERSION=${VERSION:-$(awk '/^appVersion:/ {print $2}' charts/engine/Chart.yaml)}
# cyclonedx-gomod, from the Go module proxy (go run caches the build).
CYCLONEDX=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
out=$root/bin/image
podman=(podman --cgroup-manager cgroupfs --runtime runc)

SECONDS=0
say() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

say "(1/4) container runtime"
hack/podman.sh

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
say "(2/4) root filesystem: a static engine $VERSION and its plugins, CA certificates, nonroot user"
hack/image/rootfs.sh "$ctx/rootfs" "$VERSION"
cp hack/image/Containerfile "$ctx/Containerfile"

say "(3/4) building $IMAGE:$VERSION (podman build, no network)"
"${podman[@]}" build --quiet --network none --pull=never \
  --label "org.opencontainers.image.version=$VERSION" \
  --label "org.opencontainers.image.source=https://github.com/cuengine/engine" \
  -t "$IMAGE:$VERSION" "$ctx" >/dev/null
mkdir -p "$out"
rm -f "$out/engine-$VERSION.oci.tar"
"${podman[@]}" save --quiet --format oci-archive -o "$out/engine-$VERSION.oci.tar" "$IMAGE:$VERSION"

say "(4/4) software bills of materials (CycloneDX)"
for b in engine engine-provider-gcs engine-provider-postgresql; do
  go run "$CYCLONEDX" bin -json -std -version "$VERSION" -output "$out/$b-$VERSION.cdx.json" "$ctx/rootfs/$b" 2>"$ctx/sbom.log" || {
    cat "$ctx/sbom.log" >&2
    say "cyclonedx-gomod failed on $b" >&2
    exit 1
  }
done

size=$("${podman[@]}" image inspect --format '{{.Size}}' "$IMAGE:$VERSION")
say "built $IMAGE:$VERSION ($((size / 1024 / 1024)) MiB, $(jq -r '.components | length' "$out/engine-$VERSION.cdx.json" 2>/dev/null || echo '?') modules in the SBOM) in ${SECONDS}s"
say "  archive: bin/image/engine-$VERSION.oci.tar; SBOMs: bin/image/*-$VERSION.cdx.json"
