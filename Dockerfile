# syntax=docker/dockerfile:1

# The engine's container image, for Docker users:
#
#   docker build --build-arg VERSION=v0.1.0 -t ghcr.io/cuengine/engine:v0.1.0 .
#
# `make image` builds the same image without Docker (hack/image.sh, podman):
# both assemble the root filesystem with hack/image/rootfs.sh, and this file's
# last stage is hack/image/Containerfile (e2e/image_test.go and
# cmd/engine/image_test.go keep them in step).
#
# The templates are not baked in: mount them at /templates (config/ mounts a
# ConfigMap there, which hot-reloads), or pass another --templates directory.

# Build stage. BUILDPLATFORM/TARGETOS/TARGETARCH let `docker buildx build
# --platform linux/arm64` cross-compile natively instead of under emulation.
# The golang image is Debian with ca-certificates, whose bundle the image
# ships.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src

# Modules first, in a layer of their own: it is rebuilt only when go.mod or
# go.sum change, not on every source edit.
COPY go.mod go.sum ./
RUN go mod download

COPY . .
ARG VERSION=dev
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} hack/image/rootfs.sh /rootfs "${VERSION}"

# Runtime stage: hack/image/Containerfile, from here on.
FROM scratch
COPY --from=build /rootfs/ /
# nonroot (hack/image/passwd): the pod's runAsUser and runAsGroup.
USER 65532:65532
# 8443: Prometheus metrics over HTTPS (authenticated); 8081: /healthz and /readyz.
EXPOSE 8443 8081
ENTRYPOINT ["/engine"]
CMD ["run", "--templates", "/templates"]
