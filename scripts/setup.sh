#!/usr/bin/env bash
# Installs everything mqstore needs on a fresh Debian machine: Debian packages (the JDK and
# Maven for the RocketMQ interop and remoting client tests, the real e2e node's runtime and
# image tools) and a virtualenv in .venv with the project installed in editable mode.  Safe
# to run again; it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# One setup at a time: two concurrent pip installs into one venv can break it.
mkdir -p .cache
exec 9>.cache/setup.lock
flock 9

missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
# setpriv: the RocketMQ peer's JVMs die with the Python process that started them
# (tests/remoting_clients/rocketmq_peer.py).  Go, for its Go client, comes with the machine.
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
# Redis Streams: the peer the benchmarks in bench/ measure beside mqstore, in the same run.
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# Prometheus and promtool: the observability test scrapes the services with a real Prometheus
# and checks the chart's alert rules with promtool (Debian's package ships both); the
# monitoring test on the real node runs the same binary in a pod (e2e/build-monitoring.sh).
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || missing+=(prometheus)
# fusermount3: the power-loss test mounts lossyfs, its FUSE file system (tests/powerloss/).
command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
# The real e2e node (e2e/node.py): runc and the CNI plugins it runs pods with, iptables for
# kube-proxy and the isolation rules, buildah and debootstrap for the images, gcc (with the
# static libc in libc6-dev) for the pause binary, openssl for the node's certificates.
command -v runc >/dev/null 2>&1 || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
{ command -v iptables && command -v ip6tables; } >/dev/null 2>&1 || missing+=(iptables)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
{ command -v nsenter && command -v unshare; } >/dev/null 2>&1 || missing+=(util-linux)
command -v buildah >/dev/null 2>&1 || missing+=(buildah)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
dpkg -s libc6-dev >/dev/null 2>&1 || missing+=(libc6-dev)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# ipset: kube-router, the real node's NetworkPolicy enforcer (e2e/node_netpol.py), fills its
# address sets with it.
command -v ipset >/dev/null 2>&1 || missing+=(ipset)
# The C extension (storage/format/_records.c, docs/compiled.md), built by the pip install
# below: gcc and libc6-dev (above), zlib's headers, and the headers of the Python the venv
# is made from (a Debian python3.11 keeps them in python3.11-dev).
dpkg -s zlib1g-dev >/dev/null 2>&1 || missing+=(zlib1g-dev)
base_python=$(command -v python3.11 || command -v python3)
"$base_python" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || missing+=("$(basename "$base_python")-dev")
if ((${#missing[@]})); then
    echo "setup: installing Debian packages: ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi

python=$(command -v python3.11 || command -v python3)
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# strict editable mode: the folders are mapped under the `mqstore` namespace through a link
# tree in build/, which mypy and import-linter can follow (the default import hook they can't).
.venv/bin/python -m pip install -q -e '.[dev]' --config-settings editable_mode=strict
# The install compiled the C extensions in place (storage/format/_records.*.so and
# _walk.*.so, git-ignored) and linked them into build/; check that they load, so a failed
# build stops here.
.venv/bin/python -c 'import mqstore.storage.format.compiled as c; c.extension()'
.venv/bin/python -c 'import mqstore.pipeline.compiled_walk as w; w.walk_extension()'
