"""`RouteTable`: what the name server knows, as RocketMQ's `RouteInfoManager` keeps it.

    groups           broker name -> BrokerGroup (cluster, {broker id: address}; 0 = master)
    clusters         cluster name -> broker names
    queues           topic -> {broker name: QueueData (queue counts, perm, sysflag)}
    live             (cluster, address) -> LiveBroker (last heard, data version, connection)

A master's registration (broker id 0) writes its topics' queue data under its broker name;
a follower's only adds its address to the group.  A broker is dropped (`drop`) when it
unregisters, its connection closes or it is silent `broker_expiry_ms` (`expire`): its
address leaves its group; a group left with no address leaves its cluster, and its queue
data leaves every topic (a topic left with none is gone).  A group that keeps followers
but lost its master keeps its queue data: clients pull from the followers and send to
other groups (they publish only to groups with a broker id 0).

No I/O and no clock: callers pass `now_ms`.  Past a bound (`brokers_max`,
`topics_per_broker_max`) a call raises `TableFull` and changes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

MASTER_ID = 0
PERM_WRITE = 2


class TableFull(Exception):
    """A registration past a bound of the table; the message names the setting."""


@dataclasses.dataclass(frozen=True, slots=True)
class QueueData:
    """One broker group's queues of a topic (RocketMQ's `QueueData`)."""

    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self, broker_name: str) -> dict[str, object]:
        return {"brokerName": broker_name, "perm": self.perm,
                "readQueueNums": self.read_queue_nums, "topicSysFlag": self.topic_sys_flag,
                "writeQueueNums": self.write_queue_nums}


@dataclasses.dataclass(slots=True)
class BrokerGroup:
    """A broker name's master and followers (RocketMQ's `BrokerData`)."""

    cluster: str
    broker_name: str
    addresses: dict[int, str] = dataclasses.field(default_factory=dict)
    enable_acting_master: bool = False

    def to_json(self) -> dict[str, object]:
        return {"brokerAddrs": {str(broker_id): address for broker_id, address
                                in sorted(self.addresses.items())},
                "brokerName": self.broker_name, "cluster": self.cluster,
                "enableActingMaster": self.enable_acting_master}


@dataclasses.dataclass(slots=True)
class LiveBroker:
    """One registered broker address (RocketMQ's `BrokerLiveInfo`)."""

    broker_name: str
    broker_id: int
    last_heard_ms: int
    data_version: Mapping[str, object]
    ha_server_address: str
    connection_id: int
    external_address: str = ""
    """Where clients outside the cluster network reach it (empty: none registered)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Registration:
    """A REGISTER_BROKER request, its body decoded (registration.py)."""

    cluster: str
    broker_address: str
    broker_name: str
    broker_id: int
    ha_server_address: str = ""
    topics: Mapping[str, QueueData] | None = None
    """None: a registration without topic configs (a follower's body may still carry them:
    they are ignored, as RocketMQ ignores them)."""
    data_version: Mapping[str, object] = dataclasses.field(default_factory=dict)
    enable_acting_master: bool = False
    connection_id: int = 0
    external_address: str = ""
    """mqstore's `externalBrokerAddr` header: the broker's external listener's address."""


@dataclasses.dataclass(frozen=True)
class Registered:
    """REGISTER_BROKER's answer: a follower learns its master's addresses."""

    ha_server_address: str = ""
    master_address: str = ""


def version_key(data_version: Mapping[str, object]) -> tuple[object, ...]:
    """What makes two `DataVersion`s equal (RocketMQ's `DataVersion.equals`)."""
    return (data_version.get("timestamp"), data_version.get("counter"),
            data_version.get("stateVersion", 0))


class RouteTable:
    def __init__(self, *, brokers_max: int, topics_per_broker_max: int,
                 delete_topics_on_registration: bool = False) -> None:
        assert brokers_max > 0
        assert topics_per_broker_max > 0
        self._brokers_max = brokers_max
        self._topics_per_broker_max = topics_per_broker_max
        self._delete_topics_on_registration = delete_topics_on_registration
        self.groups: dict[str, BrokerGroup] = {}
        self.clusters: dict[str, set[str]] = {}
        self.queues: dict[str, dict[str, QueueData]] = {}
        self.live: dict[tuple[str, str], LiveBroker] = {}

    # -- brokers -------------------------------------------------------------------------
    def register(self, registration: Registration, *, now_ms: int) -> Registered:
        """REGISTER_BROKER (103)."""
        key = (registration.cluster, registration.broker_address)
        self._check_bounds(registration, key)
        moved = self.live.get(key)
        if moved is not None and moved.broker_name != registration.broker_name:
            self.drop(*key)  # an address is in one group: groups stay within brokers_max
        group = self.groups.get(registration.broker_name)
        if group is None:
            group = self.groups[registration.broker_name] = BrokerGroup(
                registration.cluster, registration.broker_name)
        group.enable_acting_master = registration.enable_acting_master
        self.clusters.setdefault(registration.cluster, set()).add(registration.broker_name)
        for broker_id, address in list(group.addresses.items()):  # a follower now master
            if address == registration.broker_address and broker_id != registration.broker_id:
                del group.addresses[broker_id]
        first = group.addresses.get(registration.broker_id) != registration.broker_address
        group.addresses[registration.broker_id] = registration.broker_address
        previous = self.live.get(key)
        changed = previous is None or first or (
            version_key(previous.data_version) != version_key(registration.data_version))
        if registration.topics is not None and registration.broker_id == MASTER_ID and changed:
            self._write_topics(registration.broker_name, registration.topics)
        self.live[key] = LiveBroker(registration.broker_name, registration.broker_id, now_ms,
                                    registration.data_version,
                                    registration.ha_server_address,
                                    registration.connection_id,
                                    registration.external_address)
        if registration.broker_id == MASTER_ID:
            return Registered()
        master_address = group.addresses.get(MASTER_ID, "")
        master = self.live.get((registration.cluster, master_address))
        return Registered(master.ha_server_address if master else "",
                          master_address if master else "")

    def _check_bounds(self, registration: Registration, key: tuple[str, str]) -> None:
        if key not in self.live and len(self.live) >= self._brokers_max:
            raise TableFull(f"{len(self.live)} brokers are registered (namesrv "
                            f"brokers_max={self._brokers_max}); {key[1]} is refused")
        if registration.topics is None or registration.broker_id != MASTER_ID:
            return
        held = {topic for topic, by_broker in self.queues.items()
                if registration.broker_name in by_broker}
        count = len(registration.topics) if self._delete_topics_on_registration else len(
            held | set(registration.topics))
        if count > self._topics_per_broker_max:
            raise TableFull(f"broker {registration.broker_name} would hold {count} topics "
                            f"(namesrv topics_per_broker_max={self._topics_per_broker_max})")

    def _write_topics(self, broker_name: str, topics: Mapping[str, QueueData]) -> None:
        if self._delete_topics_on_registration:
            for topic in [topic for topic, by_broker in self.queues.items()
                          if broker_name in by_broker and topic not in topics]:
                self._remove_queues(topic, broker_name)
        for topic, queue_data in topics.items():
            self.queues.setdefault(topic, {})[broker_name] = queue_data

    def _remove_queues(self, topic: str, broker_name: str) -> None:
        by_broker = self.queues.get(topic)
        if by_broker is None:
            return
        by_broker.pop(broker_name, None)
        if not by_broker:
            del self.queues[topic]

    def external_addresses(self) -> dict[str, str]:
        """Broker address -> the external address it registered, for those that did."""
        return {address: broker.external_address
                for (_, address), broker in self.live.items() if broker.external_address}

    def heard(self, cluster: str, address: str, *, now_ms: int) -> LiveBroker | None:
        """BROKER_HEARTBEAT (904) and QUERY_DATA_VERSION (322): the broker is alive."""
        broker = self.live.get((cluster, address))
        if broker is not None:
            broker.last_heard_ms = now_ms
        return broker

    def drop(self, cluster: str, address: str) -> bool:
        """UNREGISTER_BROKER (104), a closed connection, an expiry: False if not registered."""
        broker = self.live.pop((cluster, address), None)
        if broker is None:
            return False
        group = self.groups.get(broker.broker_name)
        if group is None:
            return True
        for broker_id, group_address in list(group.addresses.items()):
            if group_address == address:
                del group.addresses[broker_id]
        if not group.addresses:
            del self.groups[broker.broker_name]
            names = self.clusters.get(group.cluster, set())
            names.discard(broker.broker_name)
            if not names:
                self.clusters.pop(group.cluster, None)
            for topic in list(self.queues):
                self._remove_queues(topic, broker.broker_name)
        return True

    def expire(self, *, now_ms: int, expiry_ms: int) -> list[str]:
        """Drop every broker not heard from for `expiry_ms`; their addresses."""
        silent = [key for key, broker in self.live.items()
                  if now_ms - broker.last_heard_ms >= expiry_ms]
        for cluster, address in silent:
            self.drop(cluster, address)
        return [address for _, address in silent]

    def connection_closed(self, connection_id: int) -> list[str]:
        """Drop the brokers that registered on a connection now closed; their addresses."""
        gone = [key for key, broker in self.live.items()
                if broker.connection_id == connection_id]
        for cluster, address in gone:
            self.drop(cluster, address)
        return [address for _, address in gone]

    # -- topics --------------------------------------------------------------------------
    def route(self, topic: str) -> dict[str, object] | None:
        """GET_ROUTEINFO_BY_TOPIC (105): a `TopicRouteData`, None if no group serves it."""
        by_broker = self.queues.get(topic)
        if not by_broker:
            return None
        groups = [self.groups[name] for name in sorted(by_broker) if name in self.groups]
        if not groups:
            return None
        return {"brokerDatas": [group.to_json() for group in groups], "filterServerTable": {},
                "queueDatas": [by_broker[name].to_json(name) for name in sorted(by_broker)]}

    def cluster_info(self) -> dict[str, object]:
        """GET_BROKER_CLUSTER_INFO (106): a `ClusterInfo`."""
        return {"brokerAddrTable": {name: group.to_json()
                                    for name, group in sorted(self.groups.items())},
                "clusterAddrTable": {cluster: sorted(names)
                                     for cluster, names in sorted(self.clusters.items())}}

    def topic_names(self, *, cluster: str | None = None) -> list[str]:
        """Every topic (206), or those with queues on a group of `cluster` (224)."""
        if cluster is None:
            return sorted(self.queues)
        names = self.clusters.get(cluster, set())
        return sorted(topic for topic, by_broker in self.queues.items()
                      if not names.isdisjoint(by_broker))

    def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV (216): everywhere, or on `cluster`'s groups only."""
        if cluster is None:
            self.queues.pop(topic, None)
            return
        for name in self.clusters.get(cluster, set()):
            self._remove_queues(topic, name)

    def set_write_permission(self, broker_name: str, *, writable: bool) -> int:
        """WIPE_WRITE_PERM_OF_BROKER (205) / ADD_WRITE_PERM_OF_BROKER (327): the number of
        topics whose queues on `broker_name` changed."""
        count = 0
        for by_broker in self.queues.values():
            queue_data = by_broker.get(broker_name)
            if queue_data is None:
                continue
            perm = queue_data.perm | PERM_WRITE if writable else queue_data.perm & ~PERM_WRITE
            by_broker[broker_name] = dataclasses.replace(queue_data, perm=perm)
            count += 1
        return count
