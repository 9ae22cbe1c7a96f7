"""The chart's observability objects, rendered by the real helm: dashboards ConfigMaps,
PodMonitor, ServiceMonitor and PrometheusRule (issue 8).  No cluster is needed: `helm
template` with `--api-versions` stands in for a cluster that serves monitoring.coreos.com."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from mqstore.operator import names
from mqstore.operator.network import notifier_labels

from .conftest import CHART, RELEASE
from .control_plane import build_binaries
from .kube import CommandError, Kube

MONITORING_API = "monitoring.coreos.com/v1"
ALL_ON = ("dashboards.enabled=true,monitoring.podMonitor.enabled=true,"
          "monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true")
DASHBOARD_FILES = sorted((CHART / "files" / "dashboards").glob("*.json"))
RULES_FILE = CHART / "files" / "rules" / "mqstore-alerts.yaml"
MONITOR_KINDS = {"PodMonitor", "ServiceMonitor", "PrometheusRule"}


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Kube:
    """helm alone: `template` never talks to a cluster, so no control plane is started."""
    directory = tmp_path_factory.mktemp("helm")
    return Kube(bin_dir=build_binaries(), kubeconfig=directory / "kubeconfig")


def _render(helm: Kube, *args: str) -> list[dict[str, Any]]:
    text = helm.helm("template", RELEASE, str(CHART), "--namespace", "monitoring-test",
                     *args).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def test_nothing_is_rendered_by_default(helm: Kube) -> None:
    docs = _render(helm, "--api-versions", MONITORING_API)
    assert not {doc["kind"] for doc in docs} & MONITOR_KINDS
    assert not _by_kind(docs, "ConfigMap")


def test_monitors_need_the_api_even_when_enabled(helm: Kube) -> None:
    docs = _render(helm, "--set", ALL_ON)
    assert not {doc["kind"] for doc in docs} & MONITOR_KINDS
    assert len(_by_kind(docs, "ConfigMap")) == len(DASHBOARD_FILES)  # ConfigMaps need no CRD


def test_everything_renders_with_the_api_and_the_values(helm: Kube) -> None:
    docs = _render(helm, "--api-versions", MONITORING_API, "--set", ALL_ON)
    names = sorted(f"{doc['kind']}/{doc['metadata']['name']}" for doc in docs
                   if doc["kind"] in MONITOR_KINDS | {"ConfigMap"})
    assert names == ["ConfigMap/mqstore-dashboard-operator",
                     "ConfigMap/mqstore-dashboard-overview",
                     "ConfigMap/mqstore-dashboard-storage", "PodMonitor/mqstore-brokers",
                     "PrometheusRule/mqstore-alerts", "ServiceMonitor/mqstore-operator"]
    assert {doc["metadata"]["namespace"] for doc in docs
            if doc["kind"] in MONITOR_KINDS} == {"monitoring-test"}


def test_a_kind_qualified_api_version_is_enough(helm: Kube) -> None:
    """A real cluster announces both monitoring.coreos.com/v1 and .../v1/<Kind>; a user's
    `helm template --api-versions` may give either."""
    for kind in sorted(MONITOR_KINDS):
        docs = _render(helm, "--api-versions", f"{MONITORING_API}/{kind}", "--set", ALL_ON)
        assert [doc["kind"] for doc in docs if doc["kind"] in MONITOR_KINDS] == [kind]


def test_dashboard_config_maps_carry_the_label_and_the_files(helm: Kube) -> None:
    docs = _render(helm, "--set", "dashboards.enabled=true",
                   "--set", "dashboards.annotations.grafana_folder=mqstore")
    maps = _by_kind(docs, "ConfigMap")
    found: dict[str, str] = {}
    for config_map in maps:
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert config_map["metadata"]["annotations"] == {"grafana_folder": "mqstore"}
        found.update(config_map["data"])
    assert sorted(found) == [path.name for path in DASHBOARD_FILES]
    for path in DASHBOARD_FILES:
        shipped = json.loads(found[path.name])
        assert shipped == json.loads(path.read_text())
        assert shipped["uid"] == path.stem


def test_the_dashboard_label_and_namespace_are_settable(helm: Kube) -> None:
    docs = _render(helm, "--set", "dashboards.enabled=true,dashboards.label=dash,"
                   "dashboards.labelValue=yes,dashboards.namespace=grafana")
    for config_map in _by_kind(docs, "ConfigMap"):
        assert config_map["metadata"]["labels"]["dash"] == "yes"
        assert "grafana_dashboard" not in config_map["metadata"]["labels"]
        assert config_map["metadata"]["namespace"] == "grafana"


def test_prometheus_rule_groups_are_the_rules_file(helm: Kube) -> None:
    docs = _render(helm, "--api-versions", MONITORING_API,
                   "--set", "monitoring.prometheusRule.enabled=true",
                   "--set", "monitoring.prometheusRule.labels.release=kps")
    [rule] = _by_kind(docs, "PrometheusRule")
    assert rule["apiVersion"] == MONITORING_API
    assert rule["metadata"]["labels"]["release"] == "kps"
    assert rule["spec"] == yaml.safe_load(RULES_FILE.read_text())


def test_runbook_base_url_replaces_the_relative_link(helm: Kube) -> None:
    base = "https://git.example.com/mqstore/blob/main/docs/alerts.md"
    docs = _render(helm, "--api-versions", MONITORING_API,
                   "--set", "monitoring.prometheusRule.enabled=true",
                   "--set", f"monitoring.prometheusRule.runbookBaseUrl={base}")
    [rule] = _by_kind(docs, "PrometheusRule")
    urls = [alert["annotations"]["runbook_url"] for group in rule["spec"]["groups"]
            for alert in group["rules"]]
    assert urls
    for url, alert in zip(urls, (alert for group in rule["spec"]["groups"]
                                 for alert in group["rules"]), strict=True):
        assert url == f"{base}#{alert['alert'].lower()}"


def test_pod_monitor_scrapes_the_three_services_and_labels_the_broker(helm: Kube) -> None:
    docs = _render(helm, "--api-versions", MONITORING_API,
                   "--set", "monitoring.podMonitor.enabled=true,monitoring.podMonitor.interval=15s")
    [monitor] = _by_kind(docs, "PodMonitor")
    spec = monitor["spec"]
    assert spec["namespaceSelector"] == {"any": True}
    assert spec["selector"]["matchLabels"] == {"app.kubernetes.io/name": "mqstore"}
    assert [endpoint["port"] for endpoint in spec["podMetricsEndpoints"]] == [
        "writer", "indexer", "notifier"]
    for endpoint in spec["podMetricsEndpoints"]:
        assert endpoint["path"] == "/metrics"
        assert endpoint["interval"] == "15s"
        assert endpoint["relabelings"] == [{
            "sourceLabels": ["__meta_kubernetes_pod_label_app_kubernetes_io_instance"],
            "targetLabel": "broker"}]


def test_pod_monitor_selects_the_pods_the_operator_builds(helm: Kube) -> None:
    """Broker pods (StatefulSet) and extra notifiers (Deployment) match the selector; the
    operator's own pod does not."""
    docs = _render(helm, "--api-versions", MONITORING_API,
                   "--set", "monitoring.podMonitor.enabled=true")
    [monitor] = _by_kind(docs, "PodMonitor")
    selector = monitor["spec"]["selector"]
    [expression] = selector["matchExpressions"]
    assert expression["operator"] == "In"

    def selected(labels: dict[str, str]) -> bool:
        return (selector["matchLabels"].items() <= labels.items()
                and labels.get(expression["key"]) in expression["values"])

    broker_pod = {**names.common_labels("obs"), **names.selector_labels("obs")}
    extra_notifier = {**names.common_labels("obs", "notifier"), **notifier_labels("obs")}
    assert selected(broker_pod)
    assert selected(extra_notifier)
    [operator_pod] = [doc["spec"]["template"]["metadata"]["labels"]
                      for doc in _by_kind(docs, "Deployment")]
    assert not selected(operator_pod)
    assert broker_pod["app.kubernetes.io/instance"] == "obs"  # what `broker` is taken from


def test_service_monitor_selects_the_metrics_service(helm: Kube) -> None:
    docs = _render(helm, "--api-versions", MONITORING_API,
                   "--set", "monitoring.serviceMonitor.enabled=true")
    [monitor] = _by_kind(docs, "ServiceMonitor")
    [service] = [doc for doc in _by_kind(docs, "Service")
                 if doc["metadata"]["name"].endswith("-metrics")]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert [endpoint["port"] for endpoint in monitor["spec"]["endpoints"]] == [
        port["name"] for port in service["spec"]["ports"]]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["monitoring-test"]}
    without_service = _render(helm, "--api-versions", MONITORING_API, "--set",
                              "monitoring.serviceMonitor.enabled=true,metrics.service=false")
    assert not _by_kind(without_service, "ServiceMonitor")


@pytest.mark.parametrize(("setting", "complaint"), [
    ("monitoring.podMonitor.enable=true", "'enable' not allowed"),
    ("monitoring.podMonitor.interval=often", "interval"),
    ("dashboards.label=", "label"),
    ("monitoring.extra=1", "'extra' not allowed"),
])
def test_values_schema_rejects_bad_monitoring_values(helm: Kube, setting: str,
                                                     complaint: str) -> None:
    with pytest.raises(CommandError) as refused:
        helm.helm("template", RELEASE, str(CHART), "--set", setting)
    assert complaint in refused.value.stderr
