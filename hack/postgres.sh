#!/usr/bin/env bash
# PostgreSQL for the postgresql provider's tests and for trying it by hand.
#
#   hack/postgres.sh install     # Debian's postgresql-15 where initdb/pg_ctl are missing (apt-get, as root)
#   hack/postgres.sh start [DIR] # a throwaway cluster in DIR (default: a new temp dir) on a free port;
#                                # prints the PG* exports for the engine (libpq's environment)
#   hack/postgres.sh stop DIR    # stop it and remove DIR
#
# The tests (internal/pgserver) and `engine dev` start their own clusters the
# same way, from the installed binaries; `make test` runs `install` first. As
# root (CI), the cluster is created and run as the postgres user, since
# PostgreSQL refuses to run as root.
set -euo pipefail

PG_PACKAGE=postgresql-15

log() { echo "postgres: $*" >&2; }

# bindir prints the directory of initdb and pg_ctl, or fails.
bindir() {
  local p
  if p=$(command -v initdb 2>/dev/null) && [ -x "$(dirname "$(readlink -f "$p")")/pg_ctl" ]; then
    dirname "$(readlink -f "$p")"
    return
  fi
  for p in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
    if [ -x "$p/initdb" ] && [ -x "$p/pg_ctl" ]; then
      echo "$p"
      return
    fi
  done
  return 1
}

install() {
  if dir=$(bindir); then
    log "server binaries found in $dir ($("$dir/pg_ctl" --version))"
    return
  fi
  if [ "$(id -u)" != 0 ]; then
    log "$PG_PACKAGE is not installed; as root run: apt-get update && apt-get install -y $PG_PACKAGE"
    exit 1
  fi
  log "installing $PG_PACKAGE with apt-get (a minute or two)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "$PG_PACKAGE" >/dev/null
  dir=$(bindir) || { log "$PG_PACKAGE installed, but no initdb/pg_ctl found"; exit 1; }
  log "installed: $("$dir/pg_ctl" --version)"
}

# as_pg runs a command as the postgres user when we are root.
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  local port
  for _ in $(seq 100); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  log "no free port found"
  exit 1
}

start() {
  local bin dir port password
  bin=$(bindir) || { log "server binaries missing: run hack/postgres.sh install"; exit 1; }
  dir=${1:-$(mktemp -d /tmp/postgres-XXXXXX)}
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  printf '%s\n' "$password" >"$dir/pwfile"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir/pwfile"
  log "initdb in $dir/data"
  as_pg "$bin/initdb" -D "$dir/data" -U admin --pwfile "$dir/pwfile" --auth=scram-sha-256 -E UTF8 --locale=C >"$dir/initdb.log"
  rm -f "$dir/pwfile"
  port=$(free_port)
  log "starting on 127.0.0.1:$port"
  as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir" start >/dev/null
  log "ready; stop it with: hack/postgres.sh stop $dir"
  cat <<EOT
export PGHOST=127.0.0.1 PGPORT=$port PGUSER=admin PGPASSWORD=$password PGSSLMODE=disable PGDATABASE=postgres
EOT
}

stop() {
  local bin dir=${1:?usage: hack/postgres.sh stop DIR}
  bin=$(bindir)
  log "stopping the cluster in $dir"
  as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
  rm -rf "$dir"
}

case "${1:-}" in
  install) install ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
