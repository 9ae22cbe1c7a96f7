"""The ports `mqstore up` gives its services by default on 127.0.0.1, which `mqstore admin`
also tries when no URL is given (services/admin/endpoints.py)."""

from __future__ import annotations

UP_PORTS = {"writer": 8081, "indexer": 8082, "notifier": 8083, "remoting": 9876, "forward": 8085}
"""Default ports: the three services' HTTP, the notifier's RocketMQ remoting front (RocketMQ's
name-server port) and the writer's listener for the sends the front forwards."""
