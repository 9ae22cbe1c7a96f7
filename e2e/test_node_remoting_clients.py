"""RocketMQ's own client reaches a Broker from another namespace on the real node, given
only the Broker's client Service as its name server (docs/kubernetes.md, "RocketMQ clients
inside the cluster").

The client is Apache RocketMQ's Go client (rocketmq-client-go v2), the program of
tests/remoting_clients/go/ built statically (CGO_ENABLED=0, Go's own resolver) and copied
into a pod of the mqstore image: the cheapest honest client.  It is RocketMQ's code doing
what an application does (ask the name server for the route, connect to the broker address
the route names, send, heartbeat, rebalance, pull, commit), where a client of our own could
skip the route; it needs no JRE image, and a 12 MB static binary runs in any image.  The
repository has no standard-library-only remoting client that runs in the image
(tests/remoting/client.py is a test helper the image does not ship).

The pods have no route off the machine (the node's network namespace); every name here is
a cluster name CoreDNS answers itself."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.remoting_clients.go_client import GoClient
from tests.remoting_clients.java_clients import json_lines

from .kube import Kube, wait_for
from .node_go_client import (
    CLIENT,
    assert_each_received_once,
    client_pod,
    copy_binary,
    exec_in_client,
    is_ready,
    users_keys,
)
from .node_state import Node

BROKER = "reach"
MESSAGES = 200
READY_TIMEOUT_S = 300.0
"""One pod: an init container and three containers with their probes on a loaded 2-core
machine (about 30 s when quiet)."""
CLIENT_TIMEOUT_S = 240.0
"""The Go program's own wait for its messages is 120 s; sends and start-up come before."""
pytestmark = pytest.mark.timeout(900)
"""The first test also brings the node up, installs the chart and builds the Go client."""


def broker_manifest(namespace: str, client_namespace: str) -> dict[str, Any]:
    """One pod; clients admitted from the client's namespace only (`network.clients`)."""
    peer = {"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": client_namespace}}}
    return {"apiVersion": "mqstore.io/v1alpha1", "kind": "Broker",
            "metadata": {"name": BROKER, "namespace": namespace},
            "spec": {"storage": {"size": "1Gi", "segmentSizeBytes": 64 << 20},
                     "network": {"clients": [peer]}}}


def test_a_go_client_in_another_namespace_produces_and_consumes_through_the_service(
        node: Node, node_kube: Kube, client_namespaces: tuple[str, str]) -> None:
    """The Go client in the client namespace, given `reach.<namespace>.svc:9876` and the
    Broker's generated admin account, sends 200 messages (each acknowledged SEND_OK) and
    its push consumer receives every one exactly once, field by field.  The route it
    followed names pod 0 by its headless-Service name, and the pod's STOREHOST is its IP."""
    kube = node_kube
    broker_namespace, client_namespace = client_namespaces
    started = time.monotonic()
    go = GoClient.build(static=True)
    built_s = time.monotonic() - started
    kube.apply(broker_manifest(broker_namespace, client_namespace))
    kube.apply(client_pod(client_namespace, node.images["mqstore"]))
    wait_for("the Broker to be Ready", lambda: is_ready(kube, "broker", BROKER, broker_namespace),
             timeout_s=READY_TIMEOUT_S)
    wait_for("the client pod to be ready", lambda: is_ready(kube, "pod", CLIENT, client_namespace),
             timeout_s=120)
    ready_s = time.monotonic() - started
    binary = copy_binary(kube, client_namespace, go.binary)
    access_key, secret_key = users_keys(kube, BROKER, broker_namespace)

    namesrv = f"{BROKER}.{broker_namespace}.svc:9876"
    output = exec_in_client(kube, client_namespace, binary, "-namesrv", namesrv, "-topic", "Reach",
                   "-count", str(MESSAGES), "-timeout-s", "120", "-access-key", access_key,
                   "-secret-key", secret_key, timeout_s=CLIENT_TIMEOUT_S)
    (report,) = list(json_lines(output))
    print(f"\ne2e: Go client built in {built_s:.1f} s, Broker and client ready at "
          f"{ready_s:.1f} s, produce and consume done at {time.monotonic() - started:.1f} s: "
          f"{json.dumps(report)}")
    assert_each_received_once(report, messages=MESSAGES)

    pod_ip = kube.must_get("pod", f"{BROKER}-0", broker_namespace)["status"]["podIP"]
    log = kube.kubectl("logs", f"{BROKER}-0", "-n", broker_namespace, "-c",
                       "notifier").stdout
    advertised = f"{BROKER}-0.{BROKER}-headless.{broker_namespace}.svc:9876"
    assert advertised in log, f"the notifier does not advertise {advertised}:\n{log[-3000:]}"
    env = kube.kubectl("exec", f"{BROKER}-0", "-n", broker_namespace, "-c", "writer", "--",
                       "python", "-c", "import os; print(os.environ['MQSTORE_STORE__STORE_HOST'])"
                       ).stdout.strip()
    assert env == f"{pod_ip}:9876"

