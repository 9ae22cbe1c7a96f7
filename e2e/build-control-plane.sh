#!/usr/bin/env bash
# Builds the e2e control plane (etcd, kube-apiserver, kube-controller-manager, kubectl, helm)
# and the node's Kubernetes binaries (kubelet, kube-scheduler, kube-proxy: e2e/node.py) from
# the Go module proxy into a git-ignored cache directory, and reuses it when present.
#
#   e2e/build-control-plane.sh        # prints the bin directory on its last line
#
# The bin directory is named after the versions in e2e/versions.env, so a version bump builds
# afresh.  MQSTORE_E2E_BIN_DIR overrides it.  Go's own module and build caches (GOMODCACHE,
# GOCACHE) make a rebuild after a wiped bin directory a matter of linking.  A missing Go
# toolchain is an error, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=versions.env
source e2e/versions.env
minor=${K8S_VERSION#1.}; minor=${minor%%.*}
bin_dir=${MQSTORE_E2E_BIN_DIR:-$root/.cache/e2e/bin-k8s$K8S_VERSION-etcd$ETCD_VERSION-helm$HELM_VERSION}
binaries=(etcd kube-apiserver kube-controller-manager kubectl helm kubelet kube-scheduler kube-proxy)

log() { echo "build-control-plane: $*" >&2; }
# shellcheck source=bin-cache.sh
source e2e/bin-cache.sh

lock_bin_dir build.lock
reuse_if_complete

need_go "the control plane"
started=$(date +%s)
work=$(mktemp -d "$root/.cache/e2e/work.XXXXXX")
trap 'rm -rf "$work"' EXIT

# 1. kube-apiserver, kube-controller-manager, kubectl, and for the real node kubelet,
# kube-scheduler and kube-proxy: one `go build`, so the shared packages compile once.  k8s.io/kubernetes requires its staging
# modules at v0.0.0 and replaces them with ./staging paths, which do not travel with a
# dependency: the wrapper module replaces each with its published v0.<minor>.<patch>, the list
# read from the release's own go.mod.
mkdir "$work/k8s" && cd "$work/k8s"
go mod init e2e.local/k8sbin >/dev/null 2>&1
gomod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
staging=$(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$gomod")
[ -n "$staging" ] || { log "ERROR: no staging replaces found in $gomod"; exit 1; }
for m in $staging; do go mod edit -replace="$m=$m@v0.${K8S_VERSION#1.}"; done
go get "k8s.io/kubernetes@v$K8S_VERSION" >/dev/null 2>&1 || go get "k8s.io/kubernetes@v$K8S_VERSION"
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldflags="$ldflags -X $p.gitTreeState=clean"
done
log "building kube-apiserver, kube-controller-manager, kubectl, kubelet, kube-scheduler, kube-proxy v$K8S_VERSION"
go build -ldflags "$ldflags" -o "$bin_dir/" k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kube-proxy

# 2. etcd: go.etcd.io/etcd/server/v3 is itself the etcd main package and requires its sibling
# modules at the same published tag, so a wrapper needs no replaces.
mkdir "$work/etcd" && cd "$work/etcd"
go mod init e2e.local/etcdbin >/dev/null 2>&1
go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1 || go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
log "building etcd $ETCD_VERSION"
go build -ldflags "-s -w" -o "$bin_dir/etcd" go.etcd.io/etcd/server/v3

# 3. helm v3 has no replaces.  Without these ldflags helm assumes Kubernetes 1.20 for
# `helm lint`/`template`, and the chart says kubeVersion >= 1.30.
log "building helm $HELM_VERSION"
cd "$work"
h=helm.sh/helm/v3
GOFLAGS=-trimpath GOBIN="$bin_dir" go install -ldflags "-s -w -X $h/internal/version.version=$HELM_VERSION \
    -X $h/pkg/chartutil.k8sVersionMajor=1 -X $h/pkg/chartutil.k8sVersionMinor=$minor \
    -X $h/pkg/lint/rules.k8sVersionMajor=1 -X $h/pkg/lint/rules.k8sVersionMinor=$minor" \
    "$h/cmd/helm@$HELM_VERSION"

"$bin_dir/kube-apiserver" --version >&2
"$bin_dir/kubelet" --version >&2
"$bin_dir/kubectl" version --client >&2
# sed, not head: head may close the pipe before etcd has written its other lines, and with
# pipefail etcd's SIGPIPE would fail the whole build (it did, once in two cold builds).
"$bin_dir/etcd" --version | sed -n 1p >&2
"$bin_dir/helm" version --short >&2
printf '%s\n' "k8s=$K8S_VERSION etcd=$ETCD_VERSION helm=$HELM_VERSION" > "$stamp"
log "built in $(( $(date +%s) - started )) s into $bin_dir"
echo "$bin_dir"
