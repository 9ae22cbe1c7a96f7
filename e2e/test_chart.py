"""The Helm chart: lint, render, values schema, and what `helm install` created."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from .conftest import CHART, OPERATOR_NAMESPACE, RELEASE
from .kube import CommandError, Kube


def _render(kube: Kube, *args: str) -> list[dict[str, Any]]:
    text = kube.helm("template", RELEASE, str(CHART), "--namespace", OPERATOR_NAMESPACE,
                     *args).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]


def test_helm_lint_strict_passes(kube: Kube) -> None:
    done = kube.helm("lint", "--strict", str(CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


def test_template_renders_the_operator_objects(kube: Kube) -> None:
    kinds = sorted(f"{doc['kind']}/{doc['metadata']['name']}" for doc in _render(kube))
    assert kinds == ["ClusterRole/mqstore", "ClusterRole/mqstore-crds",
                     "ClusterRoleBinding/mqstore", "ClusterRoleBinding/mqstore-crds",
                     "Deployment/mqstore", "Service/mqstore-metrics", "ServiceAccount/mqstore"]
    crds = _render(kube, "--include-crds")
    assert any(doc["kind"] == "CustomResourceDefinition" for doc in crds)


def test_one_namespace_gets_a_role_instead(kube: Kube) -> None:
    docs = {f"{doc['kind']}/{doc['metadata']['name']}": doc
            for doc in _render(kube, "--set", "operator.watchNamespace=apps")}
    assert sorted(docs) == ["ClusterRole/mqstore-crds", "ClusterRoleBinding/mqstore-crds",
                            "Deployment/mqstore", "Role/mqstore", "RoleBinding/mqstore",
                            "Service/mqstore-metrics", "ServiceAccount/mqstore"]
    assert docs["Role/mqstore"]["metadata"]["namespace"] == "apps"
    assert docs["ClusterRole/mqstore-crds"]["rules"] == [{
        "apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
        "verbs": ["get", "list", "watch"]}]
    command = docs["Deployment/mqstore"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "--namespace=apps" in command
    assert "--all-namespaces" not in command


@pytest.mark.parametrize(("setting", "complaint"), [
    ("bogus=1", "additional properties 'bogus' not allowed"),
    ("operator.resyncIntervalSecond=5", "'resyncIntervalSecond' not allowed"),
    ("image.pullPolicy=Sometimes", "pullPolicy"),
    ("operator.logLevel=loud", "logLevel"),
    ("operator.metricsPort=0", "metricsPort"),
])
def test_values_schema_rejects_typos_and_bad_values(kube: Kube, setting: str,
                                                    complaint: str) -> None:
    with pytest.raises(CommandError) as refused:
        kube.helm("template", RELEASE, str(CHART), "--set", setting)
    assert complaint in refused.value.stderr


def test_install_created_least_privilege_rbac(kube: Kube, release: dict[str, Any]) -> None:
    pod = release["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == RELEASE
    container = pod["containers"][0]
    assert container["image"] == "registry.invalid/mqstore:e2e"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert release["spec"]["replicas"] == 1
    assert release["spec"]["strategy"]["type"] == "Recreate"
    role = kube.must_get("clusterrole", RELEASE)
    verbs = {(group, resource): set(rule["verbs"]) for rule in role["rules"]
             for group in rule["apiGroups"] for resource in rule["resources"]}
    assert verbs["", "secrets"] == {"get", "create"}, \
        "Secrets: read one by name, create the generated ones; never list, change or delete"
    assert verbs["networking.k8s.io", "networkpolicies"] == {"create", "patch", "delete"}
    assert ("", "pods") not in verbs
    assert "*" not in set().union(*verbs.values())
    assert verbs["mqstore.io", "brokers/status"] == {"patch"}
    assert ("", "namespaces") not in verbs


def test_the_example_broker_is_accepted_by_the_api_server(kube: Kube,
                                                          release: dict[str, Any]) -> None:
    done = kube.kubectl("apply", "--dry-run=server", "-n", "default", "-f",
                        str(CHART / "examples" / "broker.yaml"))
    assert "broker.mqstore.io/demo created (server dry run)" in done.stdout
