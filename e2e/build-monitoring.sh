#!/usr/bin/env bash
# Builds what monitors the real e2e node's pods (e2e/monitoring.py) without Docker or a
# registry, into the git-ignored cache, and reuses it when complete:
#   operator, prometheus-config-reloader   the Prometheus Operator $PROMETHEUS_OPERATOR_VERSION
#                                          from the Go module proxy (a wrapper module, as
#                                          build-node.sh builds containerd)
#   prometheus                             Prometheus $PROMETHEUS_VERSION from the same module
#                                          graph, with Kubernetes as its only service discovery
#   crds/, rbac/                           the operator's CustomResourceDefinitions and the
#                                          ClusterRoles of the operator and of Prometheus, from
#                                          the operator module's source tree (example/)
# and one image per binary (scratch, the binary at upstream's path /bin/<name>, uid 65534 as
# upstream's images), as docker archives e2e/monitoring.py imports into the node's containerd.
#
#   e2e/build-monitoring.sh      # prints `bin DIR`, then one `role name archive` per image
#
# A missing Go toolchain or buildah is an error, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=versions.env
source e2e/versions.env
operator_version=$PROMETHEUS_OPERATOR_VERSION
prometheus_version=$PROMETHEUS_VERSION
operator_module=github.com/prometheus-operator/prometheus-operator
prometheus_module=github.com/prometheus/prometheus
# Prometheus' Go module numbers v3.13.1 as v0.313.1 (major * 100 + minor).
IFS=. read -r major minor patch <<< "${prometheus_version#v}"
prometheus_module_version="v0.$((major * 100 + minor)).$patch"
bin_dir=${MQSTORE_E2E_MONITORING_BIN_DIR:-$root/.cache/e2e/monitoring-bin-operator$operator_version-prometheus$prometheus_version}
binaries=(operator prometheus-config-reloader prometheus)

log() { echo "build-monitoring: $*" >&2; }

extra_complete() {  # the operator's CRDs and RBAC manifests sit beside its binaries
    [ -n "$(ls "$bin_dir/crds" 2>/dev/null)" ] && [ -n "$(ls "$bin_dir/rbac" 2>/dev/null)" ]
}
# shellcheck source=bin-cache.sh
source e2e/bin-cache.sh

lock_bin_dir build-monitoring.lock
started=$(date +%s)

# 1. The binaries.  The operator's go.mod replaces its two sibling modules (pkg/apis/monitoring,
# pkg/client) with local paths, so `go install` refuses it; it also requires them at its own
# tag, so a wrapper module that requires it needs no replace.  Prometheus joins the same
# module graph: the operator requires the version named in versions.env (checked below), so
# adding it changes nothing the operator is built from.
if complete; then
    log "reusing $bin_dir"
else
    need_go "the monitoring binaries"
    work=$(mktemp -d "$root/.cache/e2e/work-monitoring.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    cd "$work"
    go mod init e2e.local/prometheus-operator >/dev/null 2>&1
    go get "$operator_module@$operator_version" "$prometheus_module@$prometheus_module_version" \
        >/dev/null 2>&1 || go get "$operator_module@$operator_version" \
        "$prometheus_module@$prometheus_module_version"
    resolved=$(go list -m -f '{{.Version}}' "$prometheus_module")
    [ "$resolved" = "$prometheus_module_version" ] || {
        log "ERROR: $operator_module@$operator_version needs $prometheus_module $resolved, not" \
            "$prometheus_module_version: set PROMETHEUS_VERSION in e2e/versions.env to match"
        exit 1; }
    common=github.com/prometheus/common/version
    stamp_flags() {  # the Makefiles' flags: the version each binary logs and reports
        echo "-s -w -X $common.Version=${1#v} -X $common.Revision=module-proxy" \
             "-X $common.Branch=$1 -X $common.BuildUser=mqstore-e2e"
    }
    log "building the Prometheus Operator $operator_version"
    go build -ldflags "$(stamp_flags "$operator_version")" -o "$bin_dir/" \
        "$operator_module/cmd/operator" "$operator_module/cmd/prometheus-config-reloader"
    # remove_all_sd + enable_kubernetes_sd: the plugins/ build tags that leave Kubernetes the
    # only service discovery (the others are cloud SDKs this node never talks to).  Without
    # the builtinassets tag the web UI is not embedded; the HTTP API, all the tests use, is.
    log "building Prometheus $prometheus_version ($prometheus_module@$prometheus_module_version)"
    go build -tags remove_all_sd,enable_kubernetes_sd \
        -ldflags "$(stamp_flags "$prometheus_version")" -o "$bin_dir/prometheus" \
        "$prometheus_module/cmd/prometheus"
    source_dir=$(go mod download -json "$operator_module@$operator_version" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
    rm -rf "$bin_dir/crds" "$bin_dir/rbac" && mkdir "$bin_dir/crds" "$bin_dir/rbac"
    cp "$source_dir"/example/prometheus-operator-crd/monitoring.coreos.com_*.yaml "$bin_dir/crds/"
    # The ClusterRoles upstream ships for the operator and for Prometheus' discovery.
    cp "$source_dir/example/rbac/prometheus-operator/prometheus-operator-cluster-role.yaml" \
        "$source_dir/example/rbac/prometheus/prometheus-cluster-role.yaml" "$bin_dir/rbac/"
    chmod -R u+w "$bin_dir/crds" "$bin_dir/rbac"
    cd "$root"
    "$bin_dir/operator" --version >&2
    "$bin_dir/prometheus" --version >&2
    echo "prometheus-operator=$operator_version prometheus=$prometheus_version" > "$stamp"
    log "built in $(( $(date +%s) - started )) s into $bin_dir"
fi

# 2. The images.
exec 7>"$root/.cache/e2e/build-images.lock"
flock 7
# shellcheck source=image-tools.sh
source e2e/image-tools.sh
lines=()
for role in "${binaries[@]}"; do
    version=$operator_version
    [ "$role" = prometheus ] && version=$prometheus_version
    # The path is upstream's: the operator runs the reloader as /bin/prometheus-config-reloader.
    image_key=$( { echo "/bin/$role image-v2"; cat "$bin_dir/$role"; } | key)
    name="localhost/mqstore-e2e/$role:$version-$image_key"
    archive="$images/$role-$image_key.tar"
    if [ ! -f "$archive" ]; then
        binary_image "$name" "$bin_dir/$role" "bin/$role" 65534:65534
        export_image "$name" "$archive"
    fi
    lines+=("$role $name $archive")
done

log "ready in $(( $(date +%s) - started )) s"
echo "bin $bin_dir"
printf '%s\n' "${lines[@]}"
