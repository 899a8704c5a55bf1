#!/usr/bin/env bash
# Makes podman usable on this kind of machine (Debian, no Docker, no image
# registry, hybrid cgroups): installs Debian's podman and runc with apt-get
# where they are missing (as root), and writes `default_ulimits = []` into
# /etc/containers/containers.conf (the machine may not set rlimits, so a
# container with podman's default ulimits fails to start). crun, podman's
# default runtime, refuses these cgroups: run podman with
# `--cgroup-manager cgroupfs --runtime runc` (hack/image.sh and the e2e test
# do). Idempotent; prints what it does, and why when it cannot.
#
#   hack/podman.sh           # install and configure, then exit 0 when podman runs
#   hack/podman.sh --check   # only report: exit 0 when podman and runc are usable
set -euo pipefail

say() { printf '[podman %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
fail() {
  say "cannot provide a container runtime: $*" >&2
  exit 1
}

usable() { command -v podman >/dev/null && command -v runc >/dev/null; }

if [ "${1:-}" = --check ]; then
  usable
  exit
fi

if usable; then
  say "podman $(podman --version | awk '{print $3}') and runc are installed"
else
  if [ "$(id -u)" != 0 ]; then
    fail "podman and runc are missing and installing them needs root (as root: apt-get install -y podman runc)"
  fi
  if ! command -v apt-get >/dev/null; then
    fail "podman and runc are missing and there is no apt-get here to install them; install podman and runc (or Docker, and build with the Dockerfile)"
  fi
  say "installing podman and runc with apt-get (a minute or two the first time)"
  export DEBIAN_FRONTEND=noninteractive
  apt=(apt-get -o DPkg::Lock::Timeout=600 -y -q)
  if ! "${apt[@]}" install podman runc >/tmp/podman-apt.log 2>&1; then
    say "apt-get install failed; refreshing the package lists and retrying"
    "${apt[@]}" update >>/tmp/podman-apt.log 2>&1 || true
    "${apt[@]}" install podman runc >>/tmp/podman-apt.log 2>&1 ||
      fail "apt-get install podman runc failed (log: /tmp/podman-apt.log): $(tail -n 3 /tmp/podman-apt.log | tr '\n' ' ')"
  fi
  usable || fail "apt-get installed podman and runc, but they are not on PATH"
  say "installed podman $(podman --version | awk '{print $3}') and runc"
fi

# default_ulimits = [] in the [containers] table, unless it is set already.
conf=/etc/containers/containers.conf
if ! grep -qs '^[[:space:]]*default_ulimits[[:space:]]*=' "$conf"; then
  if [ ! -w "$(dirname "$conf")" ] && [ ! -w "$conf" ]; then
    fail "$conf needs 'default_ulimits = []' under [containers] and is not writable here (run as root)"
  fi
  mkdir -p "$(dirname "$conf")"
  if grep -qs '^\[containers\]' "$conf"; then
    sed -i 's/^\[containers\][[:space:]]*$/[containers]\ndefault_ulimits = []/' "$conf"
  else
    printf '\n[containers]\n# Set by hack/podman.sh: this machine may not set rlimits.\ndefault_ulimits = []\n' >>"$conf"
  fi
  say "set default_ulimits = [] in $conf"
fi

if ! out=$(podman --cgroup-manager cgroupfs --runtime runc info --format '{{.Store.GraphDriverName}}' 2>&1); then
  fail "podman info failed: $out"
fi
say "podman ready (storage driver $out)"
