#!/usr/bin/env bash
# Builds the real e2e node's own binaries into a git-ignored cache directory, and reuses it
# when complete:
#   containerd, containerd-shim-runc-v2, ctr  containerd 2.x from the Go module proxy
#   coredns                                   e2e/coredns/main.go: seven plugins, no forward
#   local-path-provisioner                    rancher's dynamic provisioner (host paths)
#   pause                                     build/pause/linux/pause.c of the k8s.io/kubernetes
#                                             module, linked statically
# The Kubernetes binaries (kubelet, kube-scheduler, kube-proxy) come from
# e2e/build-control-plane.sh; runc and the CNI plugins from Debian (scripts/setup.sh).
#
#   e2e/build-node.sh        # prints the bin directory on its last line
#
# The directory is named after the versions in e2e/versions.env; MQSTORE_E2E_NODE_BIN_DIR
# overrides it.  A missing Go toolchain or C compiler is an error, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=versions.env
source e2e/versions.env
coredns_main_sum=$(sha256sum e2e/coredns/main.go | cut -c1-12)
bin_dir=${MQSTORE_E2E_NODE_BIN_DIR:-$root/.cache/e2e/node-bin-containerd$CONTAINERD_VERSION-coredns$COREDNS_VERSION-$coredns_main_sum-lpp$LOCAL_PATH_VERSION-k8s$K8S_VERSION}
binaries=(containerd containerd-shim-runc-v2 ctr coredns local-path-provisioner pause)

log() { echo "build-node: $*" >&2; }
# shellcheck source=bin-cache.sh
source e2e/bin-cache.sh

lock_bin_dir build-node.lock
reuse_if_complete

need_go "the node's binaries"
command -v gcc >/dev/null 2>&1 || { log "ERROR: no gcc (needed for the static pause binary)"; exit 1; }
started=$(date +%s)
work=$(mktemp -d "$root/.cache/e2e/work-node.XXXXXX")
trap 'rm -rf "$work"' EXIT

# go get a module into a fresh wrapper module (its go.mod decides every dependency).
wrapper() {
    local name=$1 module=$2
    mkdir "$work/$name" && cd "$work/$name"
    go mod init "e2e.local/$name" >/dev/null 2>&1
    go get "$module" >/dev/null 2>&1 || go get "$module"
}

# 1. containerd 2.x without the storage drivers that need cgo or kernel modules we lack.
wrapper containerd "github.com/containerd/containerd/v2@$CONTAINERD_VERSION"
c=github.com/containerd/containerd/v2
log "building containerd $CONTAINERD_VERSION"
go build -tags "no_btrfs no_devmapper no_zfs" \
    -ldflags "-s -w -X $c/version.Version=$CONTAINERD_VERSION -X $c/version.Revision=module-proxy" \
    -o "$bin_dir/" "$c/cmd/containerd" "$c/cmd/containerd-shim-runc-v2" "$c/cmd/ctr"

# 2. CoreDNS: our own main with the plugins it needs.
wrapper coredns "github.com/coredns/coredns@$COREDNS_VERSION"
cp "$root/e2e/coredns/main.go" .
go mod tidy >/dev/null 2>&1 || go mod tidy
log "building coredns $COREDNS_VERSION"
go build -ldflags "-s -w" -o "$bin_dir/coredns" .

# 3. local-path-provisioner: the module root is its main package, with no replaces.
log "building local-path-provisioner $LOCAL_PATH_VERSION"
cd "$work"
GOBIN="$bin_dir" go install -ldflags "-s -w -X main.VERSION=$LOCAL_PATH_VERSION" \
    "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION"

# 4. pause: the C source ships inside the k8s.io/kubernetes module (already in Go's module
# cache after build-control-plane.sh); its Makefile names the image tag.
k8s_dir=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
pause_tag=$(sed -n 's/^TAG ?= *//p' "$k8s_dir/build/pause/Makefile")
[ -n "$pause_tag" ] || { log "ERROR: no TAG in $k8s_dir/build/pause/Makefile"; exit 1; }
log "building pause $pause_tag"
gcc -Os -Wall -Werror -static -DVERSION="v$pause_tag-mqstore" \
    -o "$bin_dir/pause" "$k8s_dir/build/pause/linux/pause.c"
strip "$bin_dir/pause"
echo "$pause_tag" > "$bin_dir/pause.tag"

"$bin_dir/containerd" --version >&2
"$bin_dir/coredns" -plugins | tr '\n' ' ' >&2; echo >&2
"$bin_dir/pause" -v >&2
printf '%s\n' "containerd=$CONTAINERD_VERSION coredns=$COREDNS_VERSION" \
    "local-path-provisioner=$LOCAL_PATH_VERSION pause=$pause_tag" > "$stamp"
log "built in $(( $(date +%s) - started )) s into $bin_dir"
echo "$bin_dir"
