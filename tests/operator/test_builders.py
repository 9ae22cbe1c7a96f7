"""The pure builders: spec in, manifests out, checked without a cluster."""

from __future__ import annotations

from typing import Any

from mqstore.operator import names
from mqstore.operator.config_map import build_config_map, config_document
from mqstore.operator.network import (
    build_client_service,
    build_disruption_budget,
    build_headless_service,
    build_notifier_deployment,
)
from mqstore.operator.reconcile import children
from mqstore.operator.spec import parse_spec
from mqstore.operator.statefulset import (
    build_statefulset,
    decide_replicas,
    keep_immutable_fields,
)

from .broker_fixtures import broker

IMAGE = "registry.example/mqstore:1"


def _spec(body: dict[str, Any]) -> Any:
    return parse_spec(body["spec"])


def _hash(body: dict[str, Any]) -> str:
    config_map = build_config_map(body, _spec(body))
    value: str = config_map["metadata"]["annotations"][names.CONFIG_HASH_ANNOTATION]
    return value


def test_config_map_carries_flush_and_pool_settings() -> None:
    body = broker(spec={"storage": {"size": "10Gi"},
                        "flush": {"mode": "sync", "intervalMs": 250, "pagesMin": 8},
                        "pool": {"enabled": True, "bufferCount": 7}})
    document = config_document(_spec(body), broker_name="demo", namespace="ns1")
    store = document["store"]
    assert (store["flush_mode"], store["flush_interval_ms"], store["flush_pages_min"]) == \
        ("sync", 250, 8)
    assert (store["pool_enabled"], store["pool_buffer_count"]) == (True, 7)
    assert document["data_dir"] == "/data"
    assert document["notifier"]["indexer_url"] == "http://127.0.0.1:8082"
    assert document["replication"] == {"host": "0.0.0.0", "port": 8084,
                                       "role_by_hostname": True,
                                       "master": "demo-0.demo-headless.ns1.svc:8084",
                                       "secret_file": "/etc/mqstore/replication/secret"}
    # The services bind loopback by default; a pod's listeners serve from outside it.
    assert [document[section]["host"] for section in
            ("writer", "indexer", "notifier", "remoting", "replication")] == ["0.0.0.0"] * 5
    assert store["role"] == "async_master"
    config_map = build_config_map(body, _spec(body))
    assert "flush_mode: sync" in config_map["data"]["mqstore.yaml"]
    assert config_map["metadata"]["name"] == "demo-config"
    assert config_map["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


def test_config_hash_follows_the_file_not_the_rest_of_the_spec() -> None:
    base = _hash(broker())
    assert base == _hash(broker())
    assert base != _hash(broker(spec={"storage": {"size": "10Gi"}, "flush": {"mode": "sync"}}))
    assert base != _hash(broker(spec={"storage": {"size": "10Gi"}, "pool": {"enabled": True}}))
    assert base == _hash(broker(spec={"storage": {"size": "10Gi"}, "replicas": 3})), \
        "scaling rolls nothing: each writer finds its role from its host name"
    assert base != _hash(broker(spec={"storage": {"size": "10Gi"}, "replicas": 3,
                                      "replication": {"mode": "sync"}}))
    assert base == _hash(broker(spec={"storage": {"size": "20Gi"}}))


def test_statefulset_pod_runs_three_services_on_one_volume() -> None:
    body = broker(spec={"storage": {"size": "10Gi", "storageClassName": "fast"},
                        "writer": {"resources": {"limits": {"memory": "2Gi"}}}})
    sts = build_statefulset(body, _spec(body), image=IMAGE, replicas=2, config_hash="abc")
    pod = sts["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["writer", "indexer", "notifier"]
    for container in pod["containers"]:
        assert container["command"][:2] == ["mqstore", container["name"]]
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["image"] == IMAGE
    assert pod["containers"][0]["resources"] == {"limits": {"memory": "2Gi"}}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["initContainers"][0]["command"][:2] == ["mqstore", "preallocate"]
    assert sts["spec"]["replicas"] == 2
    assert sts["spec"]["template"]["metadata"]["annotations"] == {
        names.CONFIG_HASH_ANNOTATION: "abc"}
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert claim["spec"]["storageClassName"] == "fast"
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"
    assert sts["spec"]["selector"]["matchLabels"].items() <= \
        sts["spec"]["template"]["metadata"]["labels"].items()


def test_no_preallocation_means_no_init_container_and_claims_deleted_on_request() -> None:
    body = broker(spec={"storage": {"size": "10Gi", "preallocate": False,
                                    "deleteClaim": True}})
    sts = build_statefulset(body, _spec(body), image=IMAGE, replicas=1, config_hash="h")
    assert "initContainers" not in sts["spec"]["template"]["spec"]
    assert "storageClassName" not in sts["spec"]["volumeClaimTemplates"][0]["spec"]
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"


def test_live_claim_templates_survive_a_grown_spec() -> None:
    body = broker()
    live = build_statefulset(body, _spec(body), image=IMAGE, replicas=1, config_hash="h")
    live["spec"]["volumeClaimTemplates"][0]["status"] = {"phase": "Pending"}
    grown = broker(spec={"storage": {"size": "50Gi"}})
    desired = build_statefulset(grown, _spec(grown), image=IMAGE, replicas=1, config_hash="h")
    merged = keep_immutable_fields(desired, live)
    (claim,) = merged["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert "status" not in claim
    assert desired["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"][
        "storage"] == "50Gi", "the desired manifest itself is not modified"
    assert keep_immutable_fields(desired, None) is desired


def test_scale_down_needs_the_annotation() -> None:
    assert decide_replicas(wanted=3, live=None, scale_down_allowed=False) == 3
    assert decide_replicas(wanted=3, live=2, scale_down_allowed=False) == 3
    assert decide_replicas(wanted=1, live=3, scale_down_allowed=False) == 3
    assert decide_replicas(wanted=1, live=3, scale_down_allowed=True) == 1


def test_services_and_budget_select_the_broker_pods() -> None:
    body = broker()
    selector = names.selector_labels("demo")
    headless = build_headless_service(body)
    assert headless["metadata"]["name"] == "demo-headless"
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["selector"] == selector
    assert {p["name"]: p["port"] for p in headless["spec"]["ports"]}["replication"] == 8084
    client = build_client_service(body)
    assert client["spec"]["selector"] == {
        **selector, "statefulset.kubernetes.io/pod-name": "demo-0"}
    assert {p["port"] for p in client["spec"]["ports"]} == {8081, 8082, 8083, 9876}
    budget = build_disruption_budget(body)
    assert budget["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}


def test_extra_notifiers_share_the_masters_claim_and_reach_its_indexer() -> None:
    body = broker(spec={"storage": {"size": "10Gi", "accessModes": ["ReadWriteMany"]},
                        "notifier": {"replicas": 2}})
    deployment = build_notifier_deployment(body, _spec(body), image=IMAGE, config_hash="h")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-demo-0"}} in \
        pod["volumes"]
    (container,) = pod["containers"]
    assert container["env"][0] == {"name": "MQSTORE_NOTIFIER__INDEXER_URL",
                                   "value": "http://demo-0.demo-headless:8082"}
    manifests, _ = children(body, _spec(body), None, image=IMAGE, replicas=1)
    assert [m["kind"] for m in manifests] == ["ConfigMap", "Service", "Service",
                                              "PodDisruptionBudget", "NetworkPolicy",
                                              "StatefulSet", "NetworkPolicy", "Deployment",
                                              "Service"]


def test_children_apply_the_config_map_before_the_statefulset() -> None:
    manifests, config_hash = children(broker(), _spec(broker()), None, image=IMAGE, replicas=1)
    kinds = [m["kind"] for m in manifests]
    assert kinds.index("ConfigMap") < kinds.index("StatefulSet")
    assert "Deployment" not in kinds
    sts = manifests[kinds.index("StatefulSet")]
    assert sts["spec"]["template"]["metadata"]["annotations"][
        names.CONFIG_HASH_ANNOTATION] == config_hash
    for manifest in manifests:
        assert manifest["metadata"]["namespace"] == "ns1"
        assert manifest["metadata"]["ownerReferences"][0]["controller"] is True
