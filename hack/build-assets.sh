#!/usr/bin/env bash
# Builds the local control plane into bin/ from Go modules, skipping what is
# already there: kube-apiserver, kube-controller-manager, kube-scheduler and
# kubectl (k8s.io/kubernetes through hack/tools), etcd (hack/tools/etcd), kwok,
# and helm (hack/tools/helm; for the chart in charts/engine).
# The first run takes about ten minutes on two cores; later runs take seconds.
#
# With arguments it builds only the named extras, which nothing else needs:
#   hack/build-assets.sh kro   # kro's controller (hack/tools/kro), the peer of `make bench PEERS=kro`
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
mkdir -p "$bin"

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
KWOK_VERSION=v0.8.0
# helm's version is pinned by hack/tools/helm/go.mod; this names it in the
# stamp and in `helm version`.
HELM_VERSION=v3.22.0
# kro's version is pinned by hack/tools/kro/go.mod.
KRO_VERSION=$(cd "$root/hack/tools/kro" && go list -m -f '{{.Version}}' github.com/kubernetes-sigs/kro)
# The Kubernetes version helm assumes without a cluster (helm template, helm
# lint): that of the client-go it is built with, as helm's own Makefile does.
HELM_KUBE_MINOR=$(cd "$root/hack/tools/helm" && go list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2)

ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=37"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

stamp() { printf '[assets %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

want=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok helm)
if [ $# -gt 0 ]; then
  for name in "$@"; do
    case "$name" in
      kro) ;;
      *) echo "build-assets.sh: unknown extra $name (want: kro)" >&2; exit 2 ;;
    esac
  done
  want=("$@")
fi
total=${#want[@]}
i=0
for name in "${want[@]}"; do
  i=$((i + 1))
  version="$K8S_VERSION/$ETCD_VERSION/$KWOK_VERSION"
  if [ "$name" = helm ]; then version="$HELM_VERSION/kube-1.$HELM_KUBE_MINOR"; fi
  if [ "$name" = kro ]; then version="$KRO_VERSION"; fi
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/.$name.version" 2>/dev/null)" = "$version" ]; then
    stamp "($i/$total) $name: already built"
    continue
  fi
  start=$(date +%s)
  case "$name" in
    kube-apiserver) note="about 5 minutes the first time" ;;
    kube-controller-manager) note="about 3 minutes the first time" ;;
    kubectl) note="about 1 minute the first time" ;;
    kwok) note="about 1.5 minutes the first time" ;;
    helm) note="about 1.5 minutes the first time" ;;
    kro) note="about 2-4 minutes the first time" ;;
    *) note="under a minute" ;;
  esac
  stamp "($i/$total) building $name ($note)..."
  # A heartbeat so a long compile never looks hung.
  ( while sleep 30; do stamp "   still building $name, $(( $(date +%s) - start ))s so far"; done ) &
  beat=$!
  trap 'kill $beat 2>/dev/null || true' EXIT
  case "$name" in
    kube-*|kubectl)
      (cd "$root/hack/tools" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin/$name" "k8s.io/kubernetes/cmd/$name") ;;
    etcd)
      (cd "$root/hack/tools/etcd" && CGO_ENABLED=0 go build -trimpath -o "$bin/etcd" go.etcd.io/etcd/server/v3) ;;
    kwok)
      CGO_ENABLED=0 GOBIN="$bin" go install -trimpath "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" ;;
    helm)
      hldflags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
      for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
        hldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$HELM_KUBE_MINOR"
      done
      (cd "$root/hack/tools/helm" && CGO_ENABLED=0 go build -trimpath -ldflags "$hldflags" -o "$bin/helm" helm.sh/helm/v3/cmd/helm) ;;
    kro)
      (cd "$root/hack/tools/kro" && CGO_ENABLED=0 go build -trimpath -o "$bin/kro" github.com/kubernetes-sigs/kro/cmd/controller) ;;
  esac
  kill $beat 2>/dev/null || true
  wait $beat 2>/dev/null || true
  echo "$version" > "$bin/.$name.version"
  stamp "($i/$total) built $name in $(( $(date +%s) - start ))s"
done
if [ $# -gt 0 ]; then
  stamp "$* in $bin"
else
  stamp "all control-plane binaries and helm are in $bin"
fi
