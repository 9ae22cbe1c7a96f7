"""The real e2e node's cluster add-ons, as manifests: CoreDNS (a pod behind the kube-dns
Service, from the image e2e/build-images.sh packs) and what rancher's local-path-provisioner
needs in the cluster (its namespace, configuration, helper pods' account, a StorageClass,
and the RBAC of the identity it runs as).

local-path-provisioner itself runs as a process in the node's namespaces with a kubeconfig
(e2e/node.py), not as a pod: it only talks to the API server, while the directories are
made and removed by helper pods it starts from `helper_image` (the Debian base image).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .node_config import CLUSTER_DOMAIN, DNS_SERVICE_IP

DNS_PORT = 1053
"""CoreDNS listens on an unprivileged port (it runs as non-root with no capabilities);
the Service maps 53 to it."""
COREDNS_HEALTH_PORT = 8080
COREDNS_READY_PORT = 8181
STORAGE_CLASS = "local-path"
PROVISIONER = "rancher.io/local-path"
PROVISIONER_NAMESPACE = "local-path-storage"
PROVISIONER_CONFIGMAP = "local-path-config"
PROVISIONER_HELPER_ACCOUNT = "local-path-provisioner-service-account"
PROVISIONER_USER = "mqstore-e2e:local-path-provisioner"

RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]}}

COREFILE = f""".:{DNS_PORT} {{
    errors
    health :{COREDNS_HEALTH_PORT}
    ready :{COREDNS_READY_PORT}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
    cache 30
    loop
}}
"""
"""No `forward`: a name outside cluster.local gets SERVFAIL from CoreDNS itself."""


def _rbac(name: str, rules: list[dict[str, Any]], subject: dict[str, str]
          ) -> list[dict[str, Any]]:
    return [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": name}, "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": name},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": name},
             "subjects": [subject]}]


def coredns(image: str) -> list[dict[str, Any]]:
    labels = {"k8s-app": "kube-dns"}
    watch = ["list", "watch"]
    container = {
        "name": "coredns", "image": image, "imagePullPolicy": "Never",
        "args": ["-conf", "/etc/coredns/Corefile"],
        "ports": [{"name": "dns", "containerPort": DNS_PORT, "protocol": "UDP"},
                  {"name": "dns-tcp", "containerPort": DNS_PORT, "protocol": "TCP"}],
        "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": True}],
        "readinessProbe": {"httpGet": {"path": "/ready", "port": COREDNS_READY_PORT},
                           "periodSeconds": 2},
        "livenessProbe": {"httpGet": {"path": "/health", "port": COREDNS_HEALTH_PORT},
                          "periodSeconds": 10, "failureThreshold": 5},
        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"},
                      "limits": {"memory": "128Mi"}},
        "securityContext": RESTRICTED_CONTAINER,
    }
    pod = {"serviceAccountName": "coredns", "dnsPolicy": "Default",
           "priorityClassName": "system-cluster-critical",
           "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                               "seccompProfile": {"type": "RuntimeDefault"}},
           "containers": [container],
           "volumes": [{"name": "config", "configMap": {"name": "coredns"}}]}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "coredns", "namespace": "kube-system"}},
        *_rbac("mqstore-e2e:coredns", [
            {"apiGroups": [""], "resources": ["services", "pods", "namespaces"], "verbs": watch},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
             "verbs": watch}],
            {"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}),
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "coredns", "namespace": "kube-system"},
         "data": {"Corefile": COREFILE}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "coredns", "namespace": "kube-system", "labels": labels},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": pod}}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": labels},
         "spec": {"clusterIP": DNS_SERVICE_IP, "selector": labels, "ports": [
             {"name": "dns", "port": 53, "targetPort": DNS_PORT, "protocol": "UDP"},
             {"name": "dns-tcp", "port": 53, "targetPort": DNS_PORT, "protocol": "TCP"}]}},
    ]


def local_path(helper_image: str, volumes_dir: Path) -> list[dict[str, Any]]:
    """Volumes are directories under `volumes_dir` (in the run's state dir), handed out as
    `local` PersistentVolumes (kubelet applies a pod's fsGroup to those, not to hostPath)."""
    config = ('{"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", '
              f'"paths": ["{volumes_dir}"]}}]}}')
    helper_pod = f"""apiVersion: v1
kind: Pod
metadata:
  name: helper-pod
spec:
  priorityClassName: system-node-critical
  containers:
  - name: helper-pod
    image: {helper_image}
    imagePullPolicy: Never
"""
    namespace = {"name": PROVISIONER_NAMESPACE}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": namespace},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": PROVISIONER_HELPER_ACCOUNT, "namespace": PROVISIONER_NAMESPACE}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": PROVISIONER_CONFIGMAP, "namespace": PROVISIONER_NAMESPACE},
         "data": {"config.json": config, "helperPod.yaml": helper_pod,
                  "setup": '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n',
                  "teardown": '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n'}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
         "metadata": {"name": STORAGE_CLASS, "annotations": {
             "storageclass.kubernetes.io/is-default-class": "true",
             "defaultVolumeType": "local"}},
         "provisioner": PROVISIONER, "reclaimPolicy": "Delete",
         "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": False},
        *_rbac("mqstore-e2e:local-path-provisioner", [
            {"apiGroups": [""], "resources": ["nodes", "configmaps"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["persistentvolumeclaims"],
             "verbs": ["get", "list", "watch", "update", "patch"]},
            {"apiGroups": [""], "resources": ["persistentvolumes"],
             "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": [""], "resources": ["pods"],
             "verbs": ["get", "list", "watch", "create", "delete"]},
            {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"],
             "verbs": ["get", "list", "watch"]}],
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
             "name": PROVISIONER_USER}),
    ]
