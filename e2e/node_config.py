"""The real e2e node's addresses and the configuration files of its daemons, as pure
builders (text or dicts from paths and names); e2e/node.py writes them and starts the
daemons.

Addresses exist only inside the node's network namespace (e2e/node_isolation.py): the
node's own address sits on its loopback, pods on the bridge, Services are iptables rules of
kube-proxy.  None of them is routed anywhere else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NODE_NAME = "mqstore-node"
NODE_IP = "10.85.0.1"
"""The node's address, on the namespace's `lo`: pods reach the API server and the kubelet
through it, and kube-apiserver advertises it as the `kubernetes` Service's endpoint."""
BRIDGE = "cni0"
POD_CIDR = "10.244.0.0/24"
POD_GATEWAY = "10.244.0.1"
SERVICE_CIDR = "10.96.0.0/24"
API_SERVICE_IP = "10.96.0.1"
DNS_SERVICE_IP = "10.96.0.10"
CLUSTER_DOMAIN = "cluster.local"
API_PORT = 6443
ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
KUBE_PROXY_HEALTH_PORT = 10256
EVICTION_HARD = {"memory.available": "100Mi", "nodefs.available": "1%",
                 "nodefs.inodesFree": "1%", "imagefs.available": "1%"}
"""Low on purpose: a shared 2-core, 24 GiB machine with a busy disk must not evict pods."""
CNI_BIN_DIR = Path("/usr/lib/cni")
"""Debian's containernetworking-plugins."""
RUNC = Path("/usr/sbin/runc")
"""Debian's runc."""

TOKENS = {
    "admin": ("system:masters",),
    f"system:node:{NODE_NAME}": ("system:nodes",),
    "system:kube-proxy": (),
    "system:kube-scheduler": (),
    "system:kube-controller-manager": (),
    "mqstore-e2e:local-path-provisioner": (),
}
"""Static-token identities: each daemon logs in as the user the API server's bootstrap RBAC
(or, for the provisioner, e2e/node_addons.py) grants what it needs; the Node authorizer
confines the kubelet to its own node."""


def token_for(user: str, secret: str) -> str:
    return f"{secret}-{user.replace(':', '-')}"


def tokens_csv(secret: str) -> str:
    """kube-apiserver's --token-auth-file: token,user,uid,"groups"."""
    lines = []
    for user, groups in TOKENS.items():
        joined = ",".join(groups)
        lines.append(f'{token_for(user, secret)},{user},{user},"{joined}"')
    return "\n".join(lines) + "\n"


def containerd_toml(*, state_dir: Path, socket: Path, sandbox_image: str,
                    cni_conf_dir: Path) -> str:
    """containerd 2.x (config version 3) with its own root, state and socket.

    `restrict_oom_score_adj`: the VM lacks CAP_SYS_RESOURCE, and runc then fails raising a
    container's oom_score_adj.  `netns_mounts_under_state_dir`: pod network namespaces are
    kept under the state dir, not /var/run/netns."""
    runtime = "plugins.'io.containerd.cri.v1.runtime'"
    return f"""version = 3
root = "{state_dir / 'root'}"
state = "{state_dir / 'state'}"

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[{runtime}]
  enable_selinux = false
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true

[{runtime}.containerd]
  default_runtime_name = "runc"

[{runtime}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{runtime}.containerd.runtimes.runc.options]
  BinaryName = "{RUNC}"
  SystemdCgroup = false

[{runtime}.cni]
  bin_dirs = ["{CNI_BIN_DIR}"]
  conf_dir = "{cni_conf_dir}"
  max_conf_num = 1

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{sandbox_image}"

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
"""


def cni_conflist(ipam_dir: Path) -> dict[str, Any]:
    """The pod network: one Linux bridge, host-local addresses, no masquerade (nothing is
    routed out of the namespace, so there is nothing to masquerade for)."""
    return {"cniVersion": "1.0.0", "name": "mqstore-e2e", "plugins": [{
        "type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False,
        "hairpinMode": True,
        "ipam": {"type": "host-local", "dataDir": str(ipam_dir),
                 "ranges": [[{"subnet": POD_CIDR, "gateway": POD_GATEWAY}]],
                 "routes": [{"dst": "0.0.0.0/0"}]}}]}


def kubelet_config(*, socket: Path, cgroup_root: str, client_ca: Path,
                   resolv_conf: Path) -> dict[str, Any]:
    """KubeletConfiguration for cgroup v1 with the cgroupfs driver, under our own cgroup
    root (so `down` finds every container), image GC off (imported images can never be
    pulled again), and low eviction thresholds."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "failCgroupV1": False, "cgroupDriver": "cgroupfs", "cgroupRoot": cgroup_root,
        "containerRuntimeEndpoint": f"unix://{socket}",
        "imageServiceEndpoint": f"unix://{socket}",
        "address": NODE_IP, "port": 10250, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(client_ca)}},
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [DNS_SERVICE_IP], "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(resolv_conf),
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "evictionHard": EVICTION_HARD, "evictionPressureTransitionPeriod": "30s",
        "failSwapOn": False, "maxPods": 30, "serializeImagePulls": False,
        "nodeStatusReportFrequency": "10s", "syncFrequency": "10s",
        "fileCheckFrequency": "10s", "logging": {"format": "text"},
    }


def kube_proxy_config(kubeconfig: Path) -> dict[str, Any]:
    """KubeProxyConfiguration in iptables mode.  The conntrack settings are zero so that
    kube-proxy leaves the kernel's conntrack table size (a host-wide value) alone."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables", "clusterCIDR": POD_CIDR, "hostnameOverride": NODE_NAME,
        "bindAddress": NODE_IP, "healthzBindAddress": f"127.0.0.1:{KUBE_PROXY_HEALTH_PORT}",
        "metricsBindAddress": "127.0.0.1:10249",
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                      "tcpCloseWaitTimeout": "0s"},
    }


def kubeconfig(*, server: str, token: str, ca_path: Path, namespace: str = "default"
               ) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "e2e-node",
            "clusters": [{"name": "e2e-node", "cluster": {
                "server": server, "certificate-authority": str(ca_path)}}],
            "users": [{"name": "e2e-node", "user": {"token": token}}],
            "contexts": [{"name": "e2e-node", "context": {
                "cluster": "e2e-node", "user": "e2e-node", "namespace": namespace}}]}


def write_json(path: Path, body: dict[str, Any], *, mode: int = 0o600) -> Path:
    """JSON is YAML, so one writer serves kubeconfigs, component configs and CNI."""
    path.write_text(json.dumps(body, indent=2) + "\n")
    path.chmod(mode)
    return path
