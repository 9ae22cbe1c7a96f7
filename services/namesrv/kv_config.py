"""`KvConfigTable`: the name server's KV config (RocketMQ's `KVConfigManager`), in memory.

    namespace -> {key: value}

PUT_KV_CONFIG (100), GET_KV_CONFIG (101), DELETE_KV_CONFIG (102) and
GET_KVLIST_BY_NAMESPACE (219).  `mqadmin updateTopic -o true` writes the namespace
`ORDER_TOPIC_CONFIG` (topic -> "brokerName:queueNum;..."); routes carry it as
`orderTopicConf` and registrations answer it.  RocketMQ persists the table to
`kvConfig.json`; here it lives as long as the process (docs/namesrv.md).
"""

from __future__ import annotations

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KvConfigFull(Exception):
    """A put past `kv_entries_max`."""


class KvConfigTable:
    def __init__(self, *, entries_max: int) -> None:
        assert entries_max > 0
        self._entries_max = entries_max
        self._entries = 0
        self._namespaces: dict[str, dict[str, str]] = {}

    @property
    def entries(self) -> int:
        return self._entries

    def put(self, namespace: str, key: str, value: str) -> None:
        table = self._namespaces.get(namespace, {})
        if key not in table and self._entries >= self._entries_max:
            raise KvConfigFull(f"{self._entries} KV config entries are held (namesrv "
                               f"kv_entries_max={self._entries_max})")
        self._entries += key not in table
        table[key] = value
        self._namespaces[namespace] = table

    def get(self, namespace: str, key: str) -> str | None:
        return self._namespaces.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        table = self._namespaces.get(namespace)
        if table is None or key not in table:
            return
        del table[key]
        self._entries -= 1
        if not table:
            del self._namespaces[namespace]

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """A namespace's entries (None: no such namespace, which RocketMQ tells apart)."""
        table = self._namespaces.get(namespace)
        return dict(table) if table is not None else None
