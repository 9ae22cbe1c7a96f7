"""The addresses a Broker's pods give RocketMQ's clients (operator/addresses.py): the
remoting port on the notifier containers and the Services, and each pod's STOREHOST and
advertised address from the downward API, checked on the built manifests."""

from __future__ import annotations

import re
from typing import Any

from mqstore.operator.addresses import (
    ADVERTISED_ADDRESS_VARIABLE,
    STORE_HOST_VARIABLE,
    advertised_address,
)
from mqstore.operator.network import (
    build_client_service,
    build_headless_service,
    build_notifier_deployment,
    build_notifier_service,
)
from mqstore.operator.network_policy import CLIENT_PORTS, NOTIFIER_CLIENT_PORTS
from mqstore.operator.spec import parse_spec
from mqstore.operator.statefulset import build_statefulset
from mqstore.services.common.settings.config_file import load_config
from mqstore.storage import ConfigError

from .broker_fixtures import broker

IMAGE = "registry.example/mqstore:1"
EXPANSION = re.compile(r"\$\((\w+)\)")


def _containers(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    pod = manifest["spec"]["template"]["spec"]
    return {container["name"]: container for container in pod["containers"]}


def _expanded(env: list[dict[str, Any]], known: dict[str, str]) -> dict[str, str]:
    """The env as the kubelet sets it: `valueFrom` from `known` (the downward API's
    answers, by field path), and `$(VAR)` only from variables listed before."""
    values: dict[str, str] = {}
    for variable in env:
        if "valueFrom" in variable:
            path = variable["valueFrom"]["fieldRef"]["fieldPath"]
            values[variable["name"]] = known[path]
        else:
            values[variable["name"]] = EXPANSION.sub(
                lambda match: values[match.group(1)], variable["value"])
    return values


def test_notifier_containers_and_services_carry_the_remoting_port() -> None:
    body = broker()
    sts = build_statefulset(body, parse_spec(body["spec"]), image=IMAGE, replicas=2,
                            config_hash="h")
    ports = {c: {p["name"]: p["containerPort"] for p in container["ports"]}
             for c, container in _containers(sts).items()}
    assert ports["notifier"] == {"notifier": 8083, "remoting": 9876}
    assert ports["writer"] == {"writer": 8081, "replication": 8084}
    assert ports["indexer"] == {"indexer": 8082}
    for service in (build_headless_service(body), build_client_service(body)):
        remoting = [p for p in service["spec"]["ports"] if p["name"] == "remoting"]
        assert remoting == [{"name": "remoting", "port": 9876, "targetPort": "remoting",
                             "protocol": "TCP"}]
    extra = broker(spec={"storage": {"size": "10Gi", "accessModes": ["ReadWriteMany"]},
                         "notifier": {"replicas": 1}})
    deployment = build_notifier_deployment(extra, parse_spec(extra["spec"]), image=IMAGE,
                                           config_hash="h")
    assert {p["name"] for p in _containers(deployment)["notifier"]["ports"]} == {
        "notifier", "remoting"}
    assert {p["name"] for p in build_notifier_service(extra)["spec"]["ports"]} == {
        "notifier"}
    assert 9876 in CLIENT_PORTS
    assert 9876 in NOTIFIER_CLIENT_PORTS


def test_each_broker_pod_advertises_its_dns_name_and_stores_its_ip() -> None:
    body = broker()
    sts = build_statefulset(body, parse_spec(body["spec"]), image=IMAGE, replicas=2,
                            config_hash="h")
    known = {"metadata.name": "demo-1", "status.podIP": "10.244.0.7"}
    for container in _containers(sts).values():
        env = _expanded(container["env"], known)
        assert env[STORE_HOST_VARIABLE] == "10.244.0.7:9876"
        assert env[ADVERTISED_ADDRESS_VARIABLE] == "demo-1.demo-headless.ns1.svc:9876"


def test_extra_notifiers_advertise_the_master() -> None:
    body = broker(spec={"storage": {"size": "10Gi", "accessModes": ["ReadWriteMany"]},
                        "notifier": {"replicas": 2}})
    deployment = build_notifier_deployment(body, parse_spec(body["spec"]), image=IMAGE,
                                           config_hash="h")
    env = _expanded(_containers(deployment)["notifier"]["env"],
                    {"status.podIP": "fd00::5"})
    assert env[STORE_HOST_VARIABLE] == "fd00::5:9876"
    assert env[ADVERTISED_ADDRESS_VARIABLE] == "demo-0.demo-headless.ns1.svc:9876"
    assert advertised_address("demo-0", broker_name="demo", namespace="ns1") == \
        env[ADVERTISED_ADDRESS_VARIABLE]


def test_the_services_read_the_pod_addresses_from_the_environment() -> None:
    """What the containers' config loader makes of the expanded variables: a DNS name is
    taken as the advertised address; the STOREHOST must stay an IP (IPv6 unbracketed too,
    the port after the last colon)."""
    for pod_ip in ("10.244.0.7", "fd00::5"):
        config = load_config(None, environ={
            "MQSTORE_DATA_DIR": "/data", STORE_HOST_VARIABLE: f"{pod_ip}:9876",
            ADVERTISED_ADDRESS_VARIABLE: "demo-1.demo-headless.ns1.svc:9876"})
        assert config.store.store_host == f"{pod_ip}:9876"
        assert config.remoting.advertised_address == "demo-1.demo-headless.ns1.svc:9876"
    for variable, value in ((STORE_HOST_VARIABLE, "demo-1.demo-headless.ns1.svc:9876"),
                            (ADVERTISED_ADDRESS_VARIABLE, "demo-1.demo-headless"),
                            (ADVERTISED_ADDRESS_VARIABLE, "demo-1:0")):
        try:
            load_config(None, environ={"MQSTORE_DATA_DIR": "/data", variable: value})
        except ConfigError:
            continue
        raise AssertionError(f"{variable}={value!r} was accepted")
