#!/usr/bin/env bash
# Prometheus for the tests that read metrics as a user's Prometheus would
# (rollout analysis; internal/promserver starts throwaway servers from it).
#
#   hack/prometheus.sh install   # Debian's prometheus where it is missing (apt-get, as root)
set -euo pipefail

log() { echo "prometheus: $*" >&2; }

install() {
  if p=$(command -v prometheus 2>/dev/null); then
    log "found $p ($(prometheus --version 2>&1 | head -1))"
    return
  fi
  if [ "$(id -u)" != 0 ]; then
    log "prometheus is not installed; as root run: apt-get update && apt-get install -y --no-install-recommends prometheus"
    exit 1
  fi
  log "installing prometheus with apt-get (a minute or two)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # The package enables a service; the tests start their own servers.
  if command -v service >/dev/null && service prometheus status >/dev/null 2>&1; then
    service prometheus stop >/dev/null 2>&1 || true
  fi
  log "installed: $(prometheus --version 2>&1 | head -1)"
}

case "${1:-}" in
  install) install ;;
  *) echo "usage: $0 install" >&2; exit 2 ;;
esac
