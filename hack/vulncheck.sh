#!/usr/bin/env bash
# make vulncheck: scans the image's engine binary with govulncheck, offline.
# The vulnerability database is built here from the golang.org/x/vulndb
# module (its data/osv reports, through the Go module proxy like any module)
# with that module's own cmd/gendb, into bin/image/vulndb-VERSION (about
# three minutes the first time, kept afterwards); govulncheck then reads it
# with -db file://. Prints the report and exits non-zero when the binary
# holds a known vulnerable symbol (govulncheck's exit status 3).
#
#   hack/vulncheck.sh [BINARY]   # default: a fresh static build of cmd/engine
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GOVULNCHECK=golang.org/x/vuln/cmd/govulncheck@v1.1.4
say() { printf '[vulncheck %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

vulndb=$(go mod download -json golang.org/x/vulndb@latest)
version=$(jq -r .Version <<<"$vulndb")
src=$(jq -r .Dir <<<"$vulndb")
db=$root/bin/image/vulndb-$version
if [ ! -s "$db/index/db.json" ]; then
  say "building the vulnerability database from golang.org/x/vulndb@$version (about three minutes)"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cp -R "$src" "$work/vulndb"
  chmod -R u+w "$work/vulndb"
  # gendb reads the reports from a git repository.
  (cd "$work/vulndb" && git init -q && git add data && git -c user.name=vulncheck -c user.email=vulncheck@localhost commit -q -m "vulndb $version")
  rm -rf "$db.tmp"
  (cd "$work/vulndb" && go run ./cmd/gendb -repo "$work/vulndb" -out "$db.tmp")
  rm -rf "$db"
  mv "$db.tmp" "$db"
fi

binary=${1:-}
if [ -z "$binary" ]; then
  binary=$root/bin/image/engine-scan
  VERSION=$(awk '/^appVersion:/ {print $2}' charts/engine/Chart.yaml)
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$binary" ./cmd/engine
fi
say "scanning $binary against golang.org/x/vulndb@$version"
go run "$GOVULNCHECK" -db "file://$db" -mode binary "$binary"
