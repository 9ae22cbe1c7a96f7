#!/usr/bin/env bash
# Every test, as CI runs it: set up, lint, type-check, check the layers, build and test
# lossyfs (the power-loss test's file system, tests/powerloss/), build the remoting client
# tests' Java and Go programs (tests/remoting_clients/), run pytest, then the e2e suite
# against a real kube-apiserver and a real single-node cluster (built into .cache/e2e on
# first use).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
# The run writes tens of GB at its peak and its brokers (mqstore's and RocketMQ's) refuse
# writes once the disk is 90% used: start only with room, saying so, rather than fail
# dozens of tests with SERVICE_NOT_AVAILABLE.
echo "== disk";        bash scripts/check-disk.sh . "${TMPDIR:-/tmp}"
echo "== ruff";        .venv/bin/ruff check .
echo "== mypy";        .venv/bin/mypy -p mqstore.storage -p mqstore.services -p mqstore.client -p mqstore.operator -p mqstore.pipeline
# The real node's harness (e2e/node*.py, e2e/monitoring*.py) is type-checked too; the rest
# of e2e/ is not yet.
echo "== mypy node";   .venv/bin/mypy --explicit-package-bases e2e/node.py e2e/node_*.py e2e/netns_forward.py e2e/test_node_*.py e2e/monitoring*.py
echo "== layers";      .venv/bin/lint-imports
# lossyfs, the power-loss test's FUSE file system: go vet, its Go tests, and the build (cached
# in .cache/lossyfs/ by a hash of its sources), outside any test's timeout.  No Go fails CI.
echo "== lossyfs";     bash scripts/build-lossyfs.sh --check
# The remoting client tests' jars (Maven Central) and Go client (module proxy), built into
# .cache/remoting_clients/ here, outside any test's timeout; a failed build fails CI.
echo "== remoting clients build"; .venv/bin/python -m tests.remoting_clients.prebuild
echo "== pytest";      .venv/bin/pytest "$@"
echo "== reference path"; MQSTORE_NO_EXTENSIONS=1 .venv/bin/pytest -q tests/storage/format tests/storage/files/test_compiled_index_put.py tests/storage/dispatch/test_dispatch_streaks.py tests/services/test_produce_core.py
# The control plane's binaries are built here, outside any test's timeout; a failed build
# (no Go, no module proxy) fails CI.  A cold build takes minutes, a cached one nothing.
echo "== e2e build";   time bash e2e/build-control-plane.sh
# The real node's binaries and images (e2e/node.py; the e2e session would build them too,
# this shows the time apart).
echo "== node build";  time .venv/bin/python -c 'from e2e.node import build; build()'
# The Prometheus Operator and the images of the monitoring test (e2e/build-monitoring.sh).
echo "== monitoring build"; time .venv/bin/python -c 'from e2e.monitoring import build; build()'
# kube-router, the real node's NetworkPolicy enforcer (e2e/build-netpol.sh).
echo "== netpol build"; time .venv/bin/python -c 'from e2e.node_netpol import build; build()'
echo "== e2e";         .venv/bin/pytest e2e
