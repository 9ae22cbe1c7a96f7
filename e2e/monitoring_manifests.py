"""What e2e/monitoring.py applies to the real node, as pure builders: the Prometheus
Operator (its ServiceAccount, upstream's ClusterRole, a restricted Deployment of the image
built from the Go module proxy) and one Prometheus custom resource whose selectors pick the
monitors and rules that carry `SELECTOR_LABEL` (the chart's `monitoring.*.labels`).

Cluster-scoped names end in the monitoring namespace's name, so two stacks (two engineers'
tests on one node) never share a ClusterRole; the operator manages Prometheus resources only
in its own namespace, while it reads monitors and rules in every namespace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

OPERATOR = "prometheus-operator"
PROMETHEUS = "prometheus"
"""The ServiceAccount Prometheus discovers targets with."""
SELECTOR_LABEL = "mqstore.io/prometheus"
"""What the Prometheus resource selects monitors and rules by (any namespace)."""
NOBODY_UID = 65534
"""The uid upstream's images run as; ours too (e2e/build-monitoring.sh)."""
SCRAPE_INTERVAL = "5s"
"""Prometheus' default interval and the rule evaluation interval here (30 s by default): a
rate over 4 intervals has data 20 s after a target appears."""
RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": NOBODY_UID, "runAsGroup": NOBODY_UID,
                  "fsGroup": NOBODY_UID, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]}}


def namespace(name: str) -> dict[str, Any]:
    """A namespace whose pods the API server holds to the restricted standard."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": name, "labels": {"pod-security.kubernetes.io/enforce": "restricted",
                                 "pod-security.kubernetes.io/enforce-version": "latest"}}}


def _cluster_role_and_binding(rbac_file: Path, *, account: str,
                              namespace_name: str) -> list[dict[str, Any]]:
    """Upstream's ClusterRole as shipped (only renamed), bound to `account`."""
    role = yaml.safe_load(rbac_file.read_text())
    assert role["kind"] == "ClusterRole", rbac_file
    name = f"{role['metadata']['name']}-{namespace_name}"
    role["metadata"] = {"name": name}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": account,
                             "namespace": namespace_name}]}
    return [role, binding]


def service_account(name: str, namespace_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace_name}}


def operator(*, namespace_name: str, image: str, reloader_image: str,
             rbac_dir: Path) -> list[dict[str, Any]]:
    """The operator, as upstream's example deploys it (example/rbac/prometheus-operator/)
    with our images; it scopes its Prometheus, Alertmanager and ThanosRuler resources to
    its own namespace and reads monitors and rules everywhere."""
    labels = {"app.kubernetes.io/name": OPERATOR}
    args = [f"--prometheus-config-reloader={reloader_image}",
            f"--prometheus-instance-namespaces={namespace_name}",
            f"--alertmanager-instance-namespaces={namespace_name}",
            f"--thanos-ruler-instance-namespaces={namespace_name}",
            "--web.listen-address=:8080", "--log-level=info"]
    container = {"name": OPERATOR, "image": image, "imagePullPolicy": "Never", "args": args,
                 "env": [{"name": "GOGC", "value": "30"}],
                 "ports": [{"name": "http", "containerPort": 8080}],
                 "resources": {"requests": {"cpu": "20m", "memory": "64Mi"},
                               "limits": {"memory": "256Mi"}},
                 "securityContext": RESTRICTED_CONTAINER}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": OPERATOR, "namespace": namespace_name, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"serviceAccountName": OPERATOR, "securityContext": RESTRICTED_POD,
                     "containers": [container], "terminationGracePeriodSeconds": 5}}}}
    return [service_account(OPERATOR, namespace_name),
            *_cluster_role_and_binding(rbac_dir / "prometheus-operator-cluster-role.yaml",
                                       account=OPERATOR, namespace_name=namespace_name),
            deployment]


def prometheus(*, name: str, namespace_name: str, image: str, version: str,
               rbac_dir: Path) -> list[dict[str, Any]]:
    """One Prometheus of our image, restricted, selecting by `SELECTOR_LABEL` the
    PodMonitors, ServiceMonitors and PrometheusRules of every namespace."""
    selector = {"matchLabels": {SELECTOR_LABEL: name}}
    resource = {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
        "metadata": {"name": name, "namespace": namespace_name},
        "spec": {
            "version": version, "image": image, "imagePullPolicy": "Never", "replicas": 1,
            "serviceAccountName": PROMETHEUS, "securityContext": RESTRICTED_POD,
            "scrapeInterval": SCRAPE_INTERVAL, "evaluationInterval": SCRAPE_INTERVAL,
            "podMonitorSelector": selector, "podMonitorNamespaceSelector": {},
            "serviceMonitorSelector": selector, "serviceMonitorNamespaceSelector": {},
            "ruleSelector": selector, "ruleNamespaceSelector": {},
            "retention": "2h",
            "resources": {"requests": {"cpu": "20m", "memory": "128Mi"},
                          "limits": {"memory": "1Gi"}}}}
    return [service_account(PROMETHEUS, namespace_name),
            *_cluster_role_and_binding(rbac_dir / "prometheus-cluster-role.yaml",
                                       account=PROMETHEUS, namespace_name=namespace_name),
            resource]


def pod_name(prometheus_name: str) -> str:
    """The operator's name for replica 0 of its StatefulSet."""
    return f"prometheus-{prometheus_name}-0"
