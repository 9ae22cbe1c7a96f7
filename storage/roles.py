"""`BrokerRole`: what a store does with replication (RocketMQ `brokerRole`).

| role          | puts                                   | acknowledged after                      |
|---------------|----------------------------------------|-----------------------------------------|
| async_master  | accepted                               | the local write (and the flush policy)  |
| sync_master   | accepted                               | also a follower has the bytes; else     |
|               |                                        | FLUSH_SLAVE_TIMEOUT past                |
|               |                                        | `replication_sync_timeout_ms`, or       |
|               |                                        | SLAVE_NOT_AVAILABLE at once when no     |
|               |                                        | follower is within                      |
|               |                                        | `replication_lag_bytes_max`             |
| follower      | refused (SERVICE_NOT_AVAILABLE)        | —: it appends the master's bytes as     |
|               |                                        | they are (`replication.append_raw`)     |

The network side (who connects where) is the writer service's (services/writer/replication_*).
"""

from __future__ import annotations

import enum


class BrokerRole(enum.Enum):
    ASYNC_MASTER = "async_master"
    """RocketMQ ASYNC_MASTER: followers copy the log, no put waits for them."""
    SYNC_MASTER = "sync_master"
    """RocketMQ SYNC_MASTER: a put is PUT_OK only once a follower has its bytes."""
    FOLLOWER = "follower"
    """RocketMQ SLAVE: the log is the master's, byte for byte; no puts."""

    @property
    def is_master(self) -> bool:
        return self is not BrokerRole.FOLLOWER
