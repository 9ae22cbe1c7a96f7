#!/usr/bin/env bash
# Builds lossyfs, the power-loss test's FUSE file system (tests/powerloss/lossyfs), into the
# git-ignored .cache/lossyfs/<hash>/lossyfs and prints that path on its last line.
#
#   scripts/build-lossyfs.sh            # build if needed, print the binary's path
#   scripts/build-lossyfs.sh --check    # also run go vet and the Go unit tests
#
# <hash> covers the Go sources, go.mod, go.sum and the Go version, so any change builds
# afresh and an unchanged tree reuses the binary.  Its one dependency,
# github.com/hanwen/go-fuse/v2 (and golang.org/x/sys), comes from the Go module proxy,
# pinned by the committed go.sum.  A missing Go toolchain is an error, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
source_dir=$root/tests/powerloss/lossyfs

log() { echo "build-lossyfs: $*" >&2; }

command -v go >/dev/null 2>&1 || { log "ERROR: no Go toolchain on PATH (needed to build lossyfs, the power-loss test's file system)"; exit 1; }
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -mod=readonly"

hash=$( { go version; cd "$source_dir" && find . -maxdepth 1 -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) \
          | LC_ALL=C sort | xargs sha256sum; } | sha256sum | cut -c1-16)
bin_dir=$root/.cache/lossyfs/$hash
binary=$bin_dir/lossyfs

mkdir -p "$root/.cache/lossyfs"
exec 8>"$root/.cache/lossyfs/build.lock"
flock 8

cd "$source_dir"
if [ "${1:-}" = "--check" ]; then
    log "go vet and go test"
    go vet ./...
    go test -count=1 ./...
fi
if [ ! -x "$binary" ]; then
    started=$(date +%s)
    mkdir -p "$bin_dir"
    go build -o "$binary.tmp" .
    mv "$binary.tmp" "$binary"
    log "built $binary in $(( $(date +%s) - started )) s"
fi
echo "$binary"
