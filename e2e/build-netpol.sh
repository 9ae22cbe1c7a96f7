#!/usr/bin/env bash
# Builds the real e2e node's NetworkPolicy enforcer into the git-ignored cache, and reuses it
# when complete:
#   kube-router   $KUBE_ROUTER_VERSION from the Go module proxy, run by e2e/node_netpol.py
#                 with its network-policy controller only (no routing, no service proxy)
# It also needs Debian's `ipset` (scripts/setup.sh), which it runs to fill its address sets.
#
#   e2e/build-netpol.sh      # prints the bin directory on its last line
#
# A missing Go toolchain is an error, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=versions.env
source e2e/versions.env
bin_dir=${MQSTORE_E2E_NETPOL_BIN_DIR:-$root/.cache/e2e/netpol-bin-kube-router$KUBE_ROUTER_VERSION}
binaries=(kube-router)

log() { echo "build-netpol: $*" >&2; }
# shellcheck source=bin-cache.sh
source e2e/bin-cache.sh

lock_bin_dir build-netpol.lock
reuse_if_complete

need_go "kube-router"
started=$(date +%s)
work=$(mktemp -d "$root/.cache/e2e/work-netpol.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The module has no replace directives, so its own go.mod decides every dependency.
cd "$work"
log "building kube-router $KUBE_ROUTER_VERSION"
GOBIN="$bin_dir" go install \
    -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"
"$bin_dir/kube-router" --version >&2
echo "kube-router=$KUBE_ROUTER_VERSION" > "$stamp"
log "built in $(( $(date +%s) - started )) s into $bin_dir"
echo "$bin_dir"
