# shellcheck shell=bash
# The cache the Go-built e2e binaries share (sourced, never run): one bin directory per set of
# versions, complete once its stamp file and every binary are there, one build at a time.
#   needs: $root (the repository), $bin_dir, $binaries (an array), log(); a script whose
#   directory holds more than binaries defines extra_complete() before calling complete.

stamp="$bin_dir/.complete"

complete() {
    [ -f "$stamp" ] || return 1
    local binary
    for binary in "${binaries[@]}"; do [ -x "$bin_dir/$binary" ] || return 1; done
    if declare -F extra_complete >/dev/null; then extra_complete; fi
}

# With a complete build there already: names $bin_dir on stdout and ends the script.
reuse_if_complete() {
    if complete; then
        log "reusing $bin_dir"
        echo "$bin_dir"
        exit 0
    fi
}

# Makes the directories and takes the build lock .cache/e2e/$1 on fd 8 (held until exit).
lock_bin_dir() {
    mkdir -p "$root/.cache/e2e" "$bin_dir"
    exec 8>"$root/.cache/e2e/$1"
    flock 8
}

# The Go toolchain, set for static, reproducible builds; $1 says what needs it.
need_go() {
    command -v go >/dev/null 2>&1 || { log "ERROR: no Go toolchain on PATH (needed to build $1)"; exit 1; }
    export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -mod=mod"
}
