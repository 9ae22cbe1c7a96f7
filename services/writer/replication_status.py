"""What the writer says about replication: `GET /v1/replication` and the Prometheus series.

A master:

    {"role": "sync_master", "written_position": 1048576, "replicated_position": 1040000,
     "followers_in_sync": 1,
     "followers": [{"name": "10.0.0.7:50412", "confirmed_position": 1040000,
                    "lag_bytes": 8576, "connected_at_ms": ..., "confirmed_at_ms": ...}]}

A follower:

    {"role": "follower", "master": "broker-0.broker-headless:8084", "connected": true,
     "written_position": 1040000, "master_position": 1048576, "lag_bytes": 8576,
     "connected_at_ms": ..., "last_frame_at_ms": ..., "bytes_received_total": ...,
     "connections_total": 3, "last_error": null}

`followers_in_sync` counts the followers less than `replication_lag_bytes_max` behind the
end: those a sync put waits for (with none, a sync master answers SLAVE_NOT_AVAILABLE). The
operator rolls a cluster's next group only once the last one's master counts every follower
(operator/rolls.py). `lag_bytes` on a master is its log's end minus what the follower
confirmed (every byte written counts, committed or not). A follower knows its master's end
from heartbeats (sent when the master is idle) and from the frames it receives:
`master_position` and `lag_bytes` are null until the first frame, and a lower bound while
the master streams without a pause (the master's own `lag_bytes` for the follower is the
exact figure).

Series (every writer's; a master's; a follower's):

    mqstore_replication_role{role}                    1 for this writer's role (async_master,
                                                      sync_master, follower), 0 for the others
    mqstore_replication_followers                     connected followers
    mqstore_replication_lag_bytes{follower}           per connected follower
    mqstore_commitlog_position_bytes{watermark="replicated"}   highest confirmed position
    mqstore_replication_sync_ack_latency_seconds      histogram: append to confirmation
                                                      (sync master)
    mqstore_replication_connected                     follower: 1 while connected
    mqstore_replication_master_lag_bytes              follower: as `lag_bytes` above
"""

from __future__ import annotations

from typing import Any

from mqstore.services.common.observability.metrics import GaugeSpec, GaugeValue
from mqstore.services.writer.replication_follower import ReplicationClient
from mqstore.storage import BrokerRole, MessageStore


def replication_status(store: MessageStore, client: ReplicationClient | None) -> dict[str, Any]:
    replication = store.replication
    end = replication.written_position
    if client is not None:
        state = client.state
        return {"role": store.config.role.value, "master": state.master,
                "connected": state.connected, "written_position": end,
                "master_position": state.master_position, "lag_bytes": client.lag_bytes,
                "connected_at_ms": state.connected_at_ms,
                "last_frame_at_ms": state.last_frame_at_ms,
                "bytes_received_total": state.bytes_received_total,
                "connections_total": state.connections_total, "last_error": state.last_error}
    progress = replication.progress
    assert progress is not None, "a master has followers' progress"
    return {"role": store.config.role.value, "written_position": end,
            "replicated_position": progress.replicated_position,
            "followers_in_sync": progress.count_within_lag(
                end, lag_bytes_max=store.config.replication_lag_bytes_max),
            "followers": [{"name": follower.name,
                           "confirmed_position": follower.confirmed_position,
                           "lag_bytes": max(0, end - follower.confirmed_position),
                           "connected_at_ms": follower.connected_at_ms,
                           "confirmed_at_ms": follower.confirmed_at_ms}
                          for follower in progress.followers()]}


def replication_gauges(store: MessageStore, client: ReplicationClient | None) -> list[GaugeSpec]:
    """The gauges above (the latency histogram is the writer metrics' own)."""
    roles: GaugeValue = {(role.value,): float(role is store.config.role) for role in BrokerRole}
    role = GaugeSpec("mqstore_replication_role", "1 for this writer's replication role.",
                     lambda: roles, labels=("role",))
    if client is not None:
        return [
            role,
            GaugeSpec("mqstore_replication_connected", "1 while connected to the master.",
                      lambda: float(client.state.connected)),
            GaugeSpec("mqstore_replication_master_lag_bytes",
                      "The master's known end (last heartbeat or frame) minus this log's end.",
                      lambda: client.lag_bytes),
        ]
    progress = store.replication.progress
    if progress is None:
        return [role]

    def lags() -> GaugeValue:
        end = store.replication.written_position
        return {(follower.name,): max(0, end - follower.confirmed_position)
                for follower in progress.followers()}

    return [
        role,
        GaugeSpec("mqstore_replication_followers", "Connected followers.",
                  lambda: len(progress.followers())),
        GaugeSpec("mqstore_replication_lag_bytes",
                  "This log's end minus what the follower confirmed.", lags,
                  labels=("follower",)),
    ]
