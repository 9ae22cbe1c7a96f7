"""The e2e node's load balancer controller: what a cloud's controller or MetalLB does for a
Service of type LoadBalancer, done by the test.

Each LoadBalancer Service of a namespace without an address is given the next address of
`POOL_PREFIX` (10.85.1.10 and up): the address is added to the node namespace's `lo`, as
MetalLB in L2 mode answers for its addresses on a node's interface, and written into the
Service's `status.loadBalancer.ingress` through the status subresource, as every such
controller does.  kube-proxy (iptables mode) then sends a connection to `<address>:<port>`
to the Service's pod: its nat OUTPUT and PREROUTING chains match the load balancer's
address as they match a NodePort.  Nothing of the pool is routed off the node: the
addresses are local to its network namespace."""

from __future__ import annotations

import json
import subprocess

from .kube import Kube
from .node_outside import outside_argv
from .node_state import Node

POOL_PREFIX = "10.85.1."
POOL_FIRST = 10
POOL_SIZE = 200


class LoadBalancerController:
    def __init__(self, node: Node, kube: Kube, namespace: str) -> None:
        self._node = node
        self._kube = kube
        self._namespace = namespace
        self.given: dict[str, str] = {}
        """Service name -> the address it was given."""

    def pass_once(self) -> dict[str, str]:
        """Give every LoadBalancer Service without an address one; what it gave."""
        services = json.loads(self._kube.kubectl(
            "get", "services", "-n", self._namespace, "-o", "json").stdout)["items"]
        given = {}
        for service in services:
            name = service["metadata"]["name"]
            if service["spec"].get("type") != "LoadBalancer" or (
                    service.get("status", {}).get("loadBalancer", {}).get("ingress")):
                continue
            address = self.given.get(name) or self._next_address()
            self._add_local(address)
            self._kube.kubectl(
                "patch", "service", name, "-n", self._namespace, "--subresource=status",
                "--type=merge", "-p",
                json.dumps({"status": {"loadBalancer": {"ingress": [{"ip": address}]}}}))
            self.given[name] = given[name] = address
        return given

    def close(self) -> None:
        """Take the addresses off the node's `lo`."""
        for address in self.given.values():
            subprocess.run(outside_argv(self._node, "ip", "addr", "del", f"{address}/32",
                                        "dev", "lo"), capture_output=True, check=False)

    def _next_address(self) -> str:
        taken = set(self.given.values())
        for index in range(POOL_FIRST, POOL_FIRST + POOL_SIZE):
            if f"{POOL_PREFIX}{index}" not in taken:
                return f"{POOL_PREFIX}{index}"
        raise AssertionError(f"the pool {POOL_PREFIX}{POOL_FIRST}+ is used up")

    def _add_local(self, address: str) -> None:
        done = subprocess.run(outside_argv(self._node, "ip", "addr", "replace",
                                           f"{address}/32", "dev", "lo"),
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
