"""`mqstore admin status`: the broker at a glance (RocketMQ's `brokerStatus`, split by service).

    every service   GET /readyz            ready, or 503 with the reason
    writer          GET /v1/replication    role, written and replicated positions, followers
    indexer         GET /v1/status         dispatched and synced positions, dispatch lag

A service that does not answer is shown as such (the command still reports the others) and
makes the exit code 1, as does one that is not ready: a script can wait on `status`.
"""

from __future__ import annotations

import json
from typing import Any

from mqstore.services.admin.client import AdminError
from mqstore.services.admin.context import Admin
from mqstore.services.admin.output import Report, Table

DETAILS = {"writer": "/v1/replication", "indexer": "/v1/status"}
SHOWN = {"writer": ("role", "written_position", "replicated_position", "lag_bytes"),
         "indexer": ("dispatched_position", "synced_position", "dispatch_behind_bytes",
                     "failure")}


def broker_status(admin: Admin) -> tuple[Report, bool]:
    """The report, and whether every service answered ready."""
    services: dict[str, dict[str, Any]] = {}
    rows: list[list[Any]] = []
    for name in ("writer", "indexer", "notifier"):
        url = admin.endpoints.url(name)
        entry: dict[str, Any] = {"url": url, **_readiness(admin, url)}
        if entry["ready"] and name in DETAILS:
            try:
                entry["status"] = admin.service(name, "GET", DETAILS[name])
            except AdminError as error:
                entry["status_error"] = str(error)
        services[name] = entry
        rows.append([name, url, "yes" if entry["ready"] else "NO", entry.get("reason"),
                     _details(name, entry)])
    every_ready = all(entry["ready"] for entry in services.values())
    return (Report({"ready": every_ready, "services": services},
                   [Table(["service", "url", "ready", "reason", "details"], rows)]),
            every_ready)


def _readiness(admin: Admin, url: str) -> dict[str, Any]:
    try:
        status, body = admin.client.exchange(url, "GET", "/readyz")
    except AdminError as error:
        return {"ready": False, "reason": str(error)}
    if status == 200:
        return {"ready": True}
    try:
        reason = json.loads(body)["error"]["reason"]
    except (ValueError, KeyError, TypeError):
        reason = body[:200].decode("utf-8", "replace")
    return {"ready": False, "reason": f"{status}: {reason}"}


def _details(name: str, entry: dict[str, Any]) -> str:
    if "status_error" in entry:
        return str(entry["status_error"])
    status = entry.get("status")
    if not status:
        return ""
    parts = [f"{field}={status[field]}" for field in SHOWN.get(name, ())
             if status.get(field) is not None]
    if name == "writer" and "followers" in status:
        parts.append(f"followers={len(status['followers'])}")
    return " ".join(parts)
