"""A Broker's broker groups: one Broker resource is one RocketMQ cluster, name servers
(operator/name_server.py) and `spec.groups` broker groups that register with them.

Every group is built by the one-group builders from a view of the Broker: the same dict,
with `metadata.name` the group's name and `names.CLUSTER_KEY` naming the Broker and the
group's index, so that

| what | group 0 | group g >= 1 |
|---|---|---|
| StatefulSet, client Service, PDB, NetworkPolicy | `<broker>` | `<broker>-g<g>` |
| headless Service | `<broker>-headless` | `<broker>-g<g>-headless` |
| claims | `data-<broker>-<n>` | `data-<broker>-g<g>-<n>` |
| ConfigMap | `<broker>-config` | `<broker>-g<g>-config` |
| label app.kubernetes.io/instance | `<broker>` | `<broker>-g<g>` |
| config remoting.broker_name | `<broker>` | `<broker>-g<g>` |
| NodePort Service of pod i (external) | `<broker>-<i>-external` | `<broker>-g<g>-<i>-external` |

and, in every group, the label `mqstore.io/broker: <broker>`, `remoting.cluster_name` the
Broker's name and `remoting.namesrv_addresses` the name servers' headless Service.  The
owner references name the Broker itself (name and uid), so every group goes with it.

Without name servers (`nameServer.replicas` 0, and so one group) the view is the Broker
itself: its children are exactly those of a Broker from before clusters existed.

Lowering `spec.groups` drains the highest group first (operator/drain.py: read only, wait
until every consumer group has read it to the end, then delete it, keeping its claims);
until it is deleted it is built as before, so the live count stays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from . import names
from .spec import GROUPS_MAX, BrokerSpec

__all__ = ["GROUPS_MAX", "cluster_spec", "clustered", "decide_groups", "group_view"]


def clustered(spec: BrokerSpec) -> bool:
    """A Broker with name servers: its groups register and carry the cluster's names."""
    return spec.name_server.replicas > 0


def group_view(broker: Mapping[str, Any], index: int, *,
               clustered: bool) -> Mapping[str, Any]:
    """What the one-group builders are given for group `index`."""
    if not clustered:
        assert index == 0, "only a Broker with name servers has more than one group"
        return broker
    name = broker["metadata"]["name"]
    return {**broker, "metadata": {**broker["metadata"], "name": names.group_name(name, index)},
            names.CLUSTER_KEY: {"name": name, "index": index}}


def decide_groups(*, wanted: int, live: int) -> int:
    """A group is removed only by its drain (operator/drain.py): until then the live
    count stays when `wanted` is lower."""
    assert 1 <= wanted <= GROUPS_MAX
    return max(wanted, live)


def cluster_spec(spec: BrokerSpec, *, live_groups: int) -> BrokerSpec:
    """The spec to build: every live group (one still draining too), and the name servers
    kept while more than one group runs."""
    groups = decide_groups(wanted=spec.groups, live=live_groups)
    if groups == spec.groups:
        return spec
    name_server = spec.name_server
    if name_server.replicas < 1:
        name_server = dataclasses.replace(name_server, replicas=1)
    return dataclasses.replace(spec, groups=groups, name_server=name_server)
