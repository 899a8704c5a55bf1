#!/usr/bin/env bash
# Assembles the root filesystem of the engine's image in OUT: the one list of
# what the image holds, used by `make image` (hack/image.sh, podman) and by the
# Dockerfile's build stage alike, so the two images have the same layout.
#
#   OUT/engine                              the engine, static (CGO_ENABLED=0)
#   OUT/engine-provider-gcs,                the provider plugins, beside the engine
#   OUT/engine-provider-postgresql          (its --provider-dir default), static
#   OUT/etc/ssl/certs/ca-certificates.crt   Debian's CA bundle (ca-certificates),
#                                           for the gcs provider's TLS to Google
#   OUT/etc/passwd, OUT/etc/group           root and nonroot (65532), the user
#                                           the image runs as
#
# That is what distroless/static holds, without pulling it: the image is built
# FROM scratch. GOOS and GOARCH cross-compile as usual.
#
#   hack/image/rootfs.sh OUT VERSION
set -euo pipefail

out=${1:?usage: hack/image/rootfs.sh OUT VERSION}
version=${2:?usage: hack/image/rootfs.sh OUT VERSION}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."

ca=/etc/ssl/certs/ca-certificates.crt
if [ ! -s "$ca" ]; then
  echo "rootfs: $ca is missing: install Debian's ca-certificates (apt-get install -y ca-certificates)" >&2
  exit 1
fi

rm -rf "$out"
mkdir -p "$out/etc/ssl/certs"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$out/" ./cmd/engine ./cmd/engine-provider-gcs ./cmd/engine-provider-postgresql
install -m 0644 "$ca" "$out/etc/ssl/certs/ca-certificates.crt"
install -m 0644 "$here/passwd" "$out/etc/passwd"
install -m 0644 "$here/group" "$out/etc/group"
