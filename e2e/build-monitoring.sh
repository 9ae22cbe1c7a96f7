#!/usr/bin/env bash
# Builds what monitors the real e2e node's pods (e2e/monitoring.py) without Docker or a
# registry, into the git-ignored cache, and reuses it when complete:
#   operator, prometheus-config-reloader   the Prometheus Operator $PROMETHEUS_OPERATOR_VERSION
#                                          from the Go module proxy (a wrapper module, as
#                                          build-node.sh builds containerd)
#   crds/, rbac/                           its CustomResourceDefinitions and the ClusterRoles of
#                                          the operator and of Prometheus, from the same
#                                          module's source tree (example/)
# and three images, as docker archives e2e/monitoring.py imports into the node's containerd:
#   prometheus-operator, config-reloader   one static binary each (scratch), at upstream's
#                                          paths /bin/operator, /bin/prometheus-config-reloader
#   prometheus                             Debian's /usr/bin/prometheus over the base image
#                                          (it links glibc), entrypoint /bin/prometheus
#
#   e2e/build-monitoring.sh BASE_IMAGE      # `bin DIR`, then one `role name archive` per image
#
# BASE_IMAGE is the name e2e/build-images.sh printed for `base` (in buildah's storage).  A
# missing Go toolchain, buildah or Prometheus binary is an error, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=versions.env
source e2e/versions.env
base_name=${1:?usage: build-monitoring.sh BASE_IMAGE}
version=$PROMETHEUS_OPERATOR_VERSION
module=github.com/prometheus-operator/prometheus-operator
bin_dir=${MQSTORE_E2E_MONITORING_BIN_DIR:-$root/.cache/e2e/monitoring-bin-prometheus-operator$version}
stamp="$bin_dir/.complete"
binaries=(operator prometheus-config-reloader)

log() { echo "build-monitoring: $*" >&2; }

complete() {
    [ -f "$stamp" ] || return 1
    for b in "${binaries[@]}"; do [ -x "$bin_dir/$b" ] || return 1; done
    [ -n "$(ls "$bin_dir/crds" 2>/dev/null)" ] && [ -n "$(ls "$bin_dir/rbac" 2>/dev/null)" ]
}

mkdir -p "$root/.cache/e2e" "$bin_dir"
exec 8>"$root/.cache/e2e/build-monitoring.lock"
flock 8
started=$(date +%s)

# 1. The operator and the config reloader.  The module's go.mod replaces its two sibling
# modules (pkg/apis/monitoring, pkg/client) with local paths, so `go install` refuses it; it
# also requires them at its own tag, so a wrapper module that requires it needs no replace.
if complete; then
    log "reusing $bin_dir"
else
    command -v go >/dev/null 2>&1 || { log "ERROR: no Go toolchain on PATH"; exit 1; }
    export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -mod=mod"
    work=$(mktemp -d "$root/.cache/e2e/work-monitoring.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    cd "$work"
    go mod init e2e.local/prometheus-operator >/dev/null 2>&1
    go get "$module@$version" >/dev/null 2>&1 || go get "$module@$version"
    common=github.com/prometheus/common/version
    log "building the Prometheus Operator $version"
    # The Makefile's own flags: the version the operator logs and stamps on what it makes.
    go build -ldflags "-s -w -X $common.Version=${version#v} -X $common.Revision=module-proxy \
        -X $common.Branch=${version} -X $common.BuildUser=mqstore-e2e" \
        -o "$bin_dir/" "$module/cmd/operator" "$module/cmd/prometheus-config-reloader"
    source_dir=$(go mod download -json "$module@$version" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
    rm -rf "$bin_dir/crds" "$bin_dir/rbac" && mkdir "$bin_dir/crds" "$bin_dir/rbac"
    cp "$source_dir"/example/prometheus-operator-crd/monitoring.coreos.com_*.yaml "$bin_dir/crds/"
    # The ClusterRoles upstream ships for the operator and for Prometheus' discovery.
    cp "$source_dir/example/rbac/prometheus-operator/prometheus-operator-cluster-role.yaml" \
        "$source_dir/example/rbac/prometheus/prometheus-cluster-role.yaml" "$bin_dir/rbac/"
    chmod -R u+w "$bin_dir/crds" "$bin_dir/rbac"
    cd "$root"
    "$bin_dir/operator" --version >&2
    echo "prometheus-operator=$version" > "$stamp"
    log "built in $(( $(date +%s) - started )) s into $bin_dir"
fi

# 2. The images.
exec 7>"$root/.cache/e2e/build-images.lock"
flock 7
# shellcheck source=image-tools.sh
source e2e/image-tools.sh
prometheus_binary=/usr/bin/prometheus
[ -x "$prometheus_binary" ] || { log "ERROR: no $prometheus_binary (scripts/setup.sh installs Debian's prometheus)"; exit 1; }
prometheus_version=$("$prometheus_binary" --version 2>&1 | sed -n 's/^prometheus, version \([0-9.]*\).*/\1/p')
[ -n "$prometheus_version" ] || { log "ERROR: cannot read the version of $prometheus_binary"; exit 1; }

lines=()
for role in operator prometheus-config-reloader; do
    # The path is upstream's: the operator runs the reloader as /bin/prometheus-config-reloader.
    image_key=$( { echo "/bin/$role image-v2"; cat "$bin_dir/$role"; } | key)
    name="localhost/mqstore-e2e/$role:$version-$image_key"
    archive="$images/$role-$image_key.tar"
    if [ ! -f "$archive" ]; then
        # uid 65534 (nobody), as upstream's busybox images run them.
        binary_image "$name" "$bin_dir/$role" "bin/$role" 65534:65534
        export_image "$name" "$archive"
    fi
    lines+=("$role $name $archive")
done

prometheus_key=$( { echo "$base_name prometheus-image-v1"; cat "$prometheus_binary"; } | key)
prometheus_name="localhost/mqstore-e2e/prometheus:v$prometheus_version-$prometheus_key"
prometheus_archive="$images/prometheus-$prometheus_key.tar"
if [ ! -f "$prometheus_archive" ]; then
    bah inspect --type image "$base_name" >/dev/null 2>&1 \
        || { log "ERROR: $base_name is not in buildah's storage (run e2e/build-images.sh)"; exit 1; }
    ctr=$(bah from "$base_name")
    bah copy --chmod 0755 "$ctr" "$prometheus_binary" /usr/bin/prometheus >/dev/null
    # What the upstream image gives the operator's pod: the binary as /bin/prometheus, the
    # data directory /prometheus as the working directory, uid 65534.
    bah config --entrypoint '["/bin/prometheus"]' --cmd '[]' --user 65534:65534 \
        --workingdir /prometheus \
        --label "org.opencontainers.image.source=mqstore e2e/build-monitoring.sh" "$ctr"
    bah commit -q --rm "$ctr" "$prometheus_name" >/dev/null
    export_image "$prometheus_name" "$prometheus_archive"
    log "prometheus image $prometheus_name ($(du -m "$prometheus_archive" | cut -f1) MiB)"
fi

log "ready in $(( $(date +%s) - started )) s"
echo "bin $bin_dir"
printf '%s\n' "${lines[@]}"
echo "prometheus $prometheus_name $prometheus_archive"
