#!/usr/bin/env bash
# Builds the container images the real e2e node runs, without Docker or a registry, into
# docker-archive files that e2e/node.py imports into the node's containerd:
#   base     Debian $DEBIAN_SUITE minbase + python3.11 (debootstrap from Debian's mirror),
#            trimmed; the mqstore image's BASE_IMAGE and local-path-provisioner's helper image
#   mqstore  the repository's Dockerfile, built by buildah (chroot isolation) over `base`,
#            from wheels made here on the host (the image build itself reaches no index)
#   pause    the static pause binary from e2e/build-node.sh, the pods' sandbox image
#   coredns  the coredns binary from e2e/build-node.sh, for the cluster's DNS pod
#
#   e2e/build-images.sh NODE_BIN_DIR   # prints one `name archive` line per image on stdout
#
# Each image is cached under .cache/e2e/images by a hash of its inputs, so a warm run only
# hashes.  buildah keeps its own storage in .cache/e2e/buildah (vfs: no mounts left behind).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=versions.env
source e2e/versions.env
node_bin=${1:?usage: build-images.sh NODE_BIN_DIR}
mkdir -p "$root/.cache/e2e"
exec 7>"$root/.cache/e2e/build-images.lock"
flock 7

log() { echo "build-images: $*" >&2; }
command -v debootstrap >/dev/null 2>&1 || { log "ERROR: debootstrap is missing (scripts/setup.sh installs it)"; exit 1; }
# shellcheck source=image-tools.sh
source e2e/image-tools.sh

started=$(date +%s)

# 1. base: debootstrap minbase with python3.11 and venv (pip comes as ensurepip's wheel).
# debootstrap does not follow a virtual dependency: python3.11-venv needs
# python3.11-distutils, which python3-distutils provides.
base_packages="python3,python3.11,python3.11-venv,python3-distutils"
base_key=$( { echo "$DEBIAN_SUITE $base_packages trim-v1"; } | key)
base_name="localhost/mqstore-e2e/base:$DEBIAN_SUITE-$base_key"
base_archive="$images/base-$base_key.tar"
if [ ! -f "$base_archive" ]; then
    log "debootstrap $DEBIAN_SUITE minbase with $base_packages"
    rootfs=$(mktemp -d "$root/.cache/e2e/rootfs.XXXXXX")
    trap 'rm -rf "$rootfs"' EXIT
    debootstrap --variant=minbase --include="$base_packages" "$DEBIAN_SUITE" "$rootfs" \
        "$DEBIAN_MIRROR" >"$images/debootstrap.log" 2>&1 \
        || { tail -n 5 "$images/debootstrap.log" >&2
             grep -i -A3 'dependency problems\|error' "$rootfs/debootstrap/debootstrap.log" \
                 | head -n 30 >&2; exit 1; }
    # Trim what no container reads: docs, man pages, locales, apt's lists and caches, and the
    # device nodes debootstrap made (the runtime mounts its own /dev).
    rm -rf "$rootfs"/usr/share/{doc,man,info,locale,lintian,linda} "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/* \
        "$rootfs"/dev/*
    ctr=$(bah from scratch)
    tar -C "$rootfs" -cf "$rootfs.tar" .
    bah add "$ctr" "$rootfs.tar" / >/dev/null
    rm -rf "$rootfs" "$rootfs.tar"
    trap - EXIT
    bah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --cmd '["/bin/bash"]' "$ctr"
    bah commit -q --rm "$ctr" "$base_name" >/dev/null
    export_image "$base_name" "$base_archive"
    log "base image $base_name ($(du -m "$base_archive" | cut -f1) MiB)"
elif ! bah inspect --type image "$base_name" >/dev/null 2>&1; then
    bah pull -q "docker-archive:$base_archive" >/dev/null
fi

# 2. mqstore: the Dockerfile over base.  Its inputs are the Dockerfile, .dockerignore, the
# files .dockerignore lets in, and the base image.
context_files() {
    { echo pyproject.toml README.md
      find storage services client operator pipeline -type f ! -path '*/__pycache__/*'; } | sort
}
app_key=$( { echo "$base_name"; cat Dockerfile .dockerignore; context_files | xargs sha256sum; } | key)
app_name="localhost/mqstore/mqstore:e2e-$app_key"
app_archive="$images/mqstore-$app_key.tar"
if [ ! -f "$app_archive" ]; then
    context=$(mktemp -d "$root/.cache/e2e/context.XXXXXX")
    trap 'rm -rf "$context"' EXIT
    context_files | xargs cp --parents -t "$context"
    cp Dockerfile .dockerignore "$context/"
    # The project and every dependency as wheels, made on the host (python 3.11, the base
    # image's version): the Dockerfile installs them with --no-index.
    log "pip wheel into the build context"
    python=$(command -v python3.11 || command -v python3)
    "$python" -m pip wheel -q --wheel-dir "$context/wheels" "$context" >&2
    log "buildah bud $app_name"
    # chroot isolation shares the host's network (buildah allows no other with it); the
    # Dockerfile's --no-index install is what keeps this build off the network.
    bah bud --isolation chroot --layers=false -q \
        --build-arg "BASE_IMAGE=$base_name" -t "$app_name" -f "$context/Dockerfile" \
        "$context" >&2
    rm -rf "$context"
    trap - EXIT
    export_image "$app_name" "$app_archive"
    log "mqstore image $app_name ($(du -m "$app_archive" | cut -f1) MiB)"
fi

# 3. pause and coredns: one static binary each.
pause_tag=$(cat "$node_bin/pause.tag")
pause_key=$(key < "$node_bin/pause")
pause_name="localhost/mqstore-e2e/pause:$pause_tag-$pause_key"
pause_archive="$images/pause-$pause_key.tar"
if [ ! -f "$pause_archive" ]; then
    binary_image "$pause_name" "$node_bin/pause" pause 65535:65535
    export_image "$pause_name" "$pause_archive"
fi
coredns_key=$(key < "$node_bin/coredns")
coredns_name="localhost/mqstore-e2e/coredns:$COREDNS_VERSION-$coredns_key"
coredns_archive="$images/coredns-$coredns_key.tar"
if [ ! -f "$coredns_archive" ]; then
    binary_image "$coredns_name" "$node_bin/coredns" coredns 65532:65532
    export_image "$coredns_name" "$coredns_archive"
fi

log "images ready in $(( $(date +%s) - started )) s"
printf 'base %s %s\nmqstore %s %s\npause %s %s\ncoredns %s %s\n' \
    "$base_name" "$base_archive" "$app_name" "$app_archive" \
    "$pause_name" "$pause_archive" "$coredns_name" "$coredns_archive"
