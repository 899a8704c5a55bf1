# syntax=docker/dockerfile:1

# The engine's container image.
#
#   docker build --build-arg VERSION=v0.1.0 -t ghcr.io/cuengine/engine:v0.1.0 .
#
# The templates are not baked in: mount them at /templates (config/ mounts a
# ConfigMap there, which hot-reloads), or pass another --templates directory.

# Build stage. BUILDPLATFORM/TARGETOS/TARGETARCH let `docker buildx build
# --platform linux/arm64` cross-compile natively instead of under emulation.
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
# Static binaries (no cgo), so the runtime image needs no libc: the engine
# and its provider plugins, which it finds beside itself (--provider-dir
# defaults to the engine binary's directory) and runs as processes in the
# same container.
RUN --mount=type=cache,target=/root/.cache/go-build \
    mkdir /out && \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/ ./cmd/engine ./cmd/engine-provider-gcs ./cmd/engine-provider-postgresql

# Runtime stage. distroless/static ships CA certificates
# (/etc/ssl/certs/ca-certificates.crt), which the GCS provider needs to reach
# storage.googleapis.com over TLS (without them: "x509: failed to load system
# roots"), tzdata and /etc/passwd, and nothing else: no shell, no package
# manager. The :nonroot tag runs as user and group 65532 (nonroot). The
# plugins' sockets go under /tmp, which the chart and config/ mount as an
# emptyDir (the root filesystem is read-only there).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/engine /out/engine-provider-gcs /out/engine-provider-postgresql /
USER 65532:65532
# 8080: Prometheus metrics; 8081: /healthz and /readyz.
EXPOSE 8080 8081
ENTRYPOINT ["/engine"]
CMD ["run", "--templates", "/templates"]
