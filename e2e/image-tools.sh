# shellcheck shell=bash
# The image machinery the e2e build scripts share (sourced, never run): buildah with its own
# storage in .cache/e2e/buildah (vfs driver: no mounts left behind), images exported as
# docker archives that `ctr images import` reads, input hashes for cache keys.
#   needs: $root (the repository), log()

store="$root/.cache/e2e/buildah"
images="$root/.cache/e2e/images"
mkdir -p "$images"

for tool in buildah sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || { log "ERROR: $tool is missing (scripts/setup.sh installs it)"; exit 1; }
done
bah() { buildah --root "$store/root" --runroot "$store/runroot" --storage-driver vfs "$@"; }
key() { sha256sum | cut -c1-16; }

# Exports image $1 to $2 (docker-archive names it, so `ctr import` keeps the name).
export_image() {
    rm -f "$2.partial"
    bah push -q "$1" "docker-archive:$2.partial:$1" >/dev/null
    mv "$2.partial" "$2"
}

# An image made of one static binary: scratch + $2 at /$3, entrypoint /$3, run as $4.
binary_image() {
    local name=$1 binary=$2 path=$3 user=$4 ctr
    ctr=$(bah from scratch)
    bah copy --chmod 0755 "$ctr" "$binary" "/$path" >/dev/null
    bah config --entrypoint "[\"/$path\"]" --cmd '[]' --user "$user" \
        --label "org.opencontainers.image.source=mqstore e2e/${0##*/}" "$ctr"
    bah commit -q --rm "$ctr" "$name" >/dev/null
}
