"""REGISTER_BROKER (103) and UNREGISTER_BROKER (104) as the front sends them to name servers,
built as RocketMQ 5.5.0's `BrokerOuterAPI.registerBrokerAll` builds them.  No I/O here.

REGISTER_BROKER header (`RegisterBrokerRequestHeader`, every value a string):

    brokerName, brokerAddr, clusterName   remoting.broker_name, the advertised address,
                                          remoting.cluster_name
    brokerId                              remoting.broker_id (0: the master)
    haServerAddr                          remoting.ha_server_address
    enableActingMaster, compressed        "false" (bodies are plain JSON, RocketMQ's default)
    bodyCrc32                             `UtilAll.crc32(body)`: the CRC-32's low 31 bits

Body (`RegisterBrokerBody`, JSON):

    {"topicConfigSerializeWrapper": {
        "topicConfigTable": {name: TopicConfig, ...},     topics.py `TopicConfig.to_json`
        "dataVersion": {"stateVersion": 0, "timestamp": ms, "counter": n},
        "topicQueueMappingInfoMap": {}, "topicQueueMappingDetailMap": {},
        "mappingDataVersion": {...}},
     "filterServerList": []}

A name server records a master's topics only when the data version differs from the one
it holds (RocketMQ's `isBrokerTopicConfigChanged`), so `DataVersion.advance` runs on every
change of the table.  UNREGISTER_BROKER carries brokerName, brokerAddr, clusterName and
brokerId, and no body.
"""

from __future__ import annotations

import dataclasses
import time
import zlib
from collections.abc import Mapping

from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.common.topics.rules import (
    AUTO_CREATE_TOPIC,
    RETRY_PREFIX,
    RETRY_QUEUE_COUNT,
)
from mqstore.services.notifier.remoting import bodies
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.headers import EXTERNAL_ADDRESS_FIELD
from mqstore.services.notifier.remoting.topics import (
    PERM_READ_WRITE,
    TopicConfig,
    TopicTable,
)

REGISTER_BROKER = 103
UNREGISTER_BROKER = 104
CRC32_MASK = 0x7FFFFFFF
"""RocketMQ's `UtilAll.crc32` keeps 31 bits (a Java int that is never negative)."""


@dataclasses.dataclass
class DataVersion:
    """RocketMQ's `DataVersion`: a counter and the time of the last change."""

    counter: int = 0
    timestamp_ms: int = dataclasses.field(default_factory=lambda: time.time_ns() // 1_000_000)

    def advance(self) -> None:
        self.counter += 1
        self.timestamp_ms = time.time_ns() // 1_000_000

    def to_json(self) -> dict[str, object]:
        return {"stateVersion": 0, "timestamp": self.timestamp_ms, "counter": self.counter}


def registered_topics(topics: TopicTable, groups: set[str], *,
                      auto_create: bool) -> dict[str, TopicConfig]:
    """What the front registers: every topic it routes (created, on the volume, the reply
    topic), TBW102 when sends may auto-create (clients route new topics by it), and
    `%RETRY%<group>` of each consumer group known, as RocketMQ's broker creates them."""
    found: dict[str, TopicConfig] = {}
    for name in [AUTO_CREATE_TOPIC, *topics.names()] if auto_create else topics.names():
        config = topics.get(name)
        if config is not None:
            found[name] = config
    for group in groups:
        name = f"{RETRY_PREFIX}{group}"
        found.setdefault(name, TopicConfig(name, RETRY_QUEUE_COUNT, RETRY_QUEUE_COUNT,
                                           PERM_READ_WRITE))
    return found


def java_crc32(body: bytes) -> int:
    return zlib.crc32(body) & CRC32_MASK


def register_body(topics: Mapping[str, TopicConfig], version: DataVersion) -> bytes:
    wrapper = {"topicConfigTable": {name: config.to_json() for name, config
                                    in sorted(topics.items())},
               "dataVersion": version.to_json(), "topicQueueMappingInfoMap": {},
               "topicQueueMappingDetailMap": {},
               "mappingDataVersion": DataVersion(0, version.timestamp_ms).to_json()}
    return bodies.encode({"topicConfigSerializeWrapper": wrapper, "filterServerList": []})


def identity(settings: RemotingSettings, broker_address: str) -> dict[str, str]:
    """The header fields that name this broker, in both requests."""
    return {"brokerName": settings.broker_name, "brokerAddr": broker_address,
            "clusterName": settings.cluster_name, "brokerId": str(settings.broker_id)}


def register_request(settings: RemotingSettings, *, broker_address: str, body: bytes,
                     opaque: int) -> Command:
    fields = identity(settings, broker_address) | {
        "haServerAddr": settings.ha_server_address, "enableActingMaster": "false",
        "compressed": "false", "bodyCrc32": str(java_crc32(body))}
    if settings.external_enabled:
        fields[EXTERNAL_ADDRESS_FIELD] = settings.external_address
    return Command(REGISTER_BROKER, opaque, ext_fields=fields, body=body)


def unregister_request(settings: RemotingSettings, *, broker_address: str,
                       opaque: int) -> Command:
    return Command(UNREGISTER_BROKER, opaque, ext_fields=identity(settings, broker_address))
