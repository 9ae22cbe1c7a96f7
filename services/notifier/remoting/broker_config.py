"""The broker's settings at run time: UPDATE_BROKER_CONFIG (25) and GET_BROKER_CONFIG (26),
what `mqadmin updateBrokerConfig` and `getBrokerConfig` send.

    updateBrokerConfig -b <addr> -k brokerPermission -v 4    drain: read only
    updateBrokerConfig -b <addr> -k brokerPermission -v 6    serve sends again

Only `brokerPermission` is taken at run time (2 write, 4 read, 6 both; 1 inherit is kept as
given): it is written to `config/broker.properties` (storage/files/broker_properties.py), so
every notifier of the volume and a restart keep it, and from the next lookup on every topic
is served with it while it lacks read or write (topics.py): routes and registrations carry
it (the registrar registers again within `register_topics_check_interval_ms`), and a send
is refused with NO_PERMISSION and RocketMQ's remark.  Another key is refused with
SYSTEM_ERROR naming it, nothing changed: mqstore's other settings live in its config file.

GET_BROKER_CONFIG answers the settings a RocketMQ tool reads from a broker's config, as
Java properties text, and header `version` (a `DataVersion` whose timestamp is when the
properties file last changed).
"""

from __future__ import annotations

import json

from mqstore.services.notifier.remoting import headers
from mqstore.services.notifier.remoting.codes import SUCCESS, SYSTEM_ERROR, RemotingError
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.topics import BROKER_PERMISSION_KEY
from mqstore.storage.files.broker_properties import parse

RUN_TIME_KEYS = frozenset({BROKER_PERMISSION_KEY})
PERMISSION_MAX = 7


async def update_broker_config(front: Front, request: Command, peer: Peer) -> Command:
    """UPDATE_BROKER_CONFIG (25): the body's properties, `brokerPermission` only."""
    try:
        changes = parse(bytes(request.body).decode("utf-8"))
    except UnicodeDecodeError as error:
        raise RemotingError(SYSTEM_ERROR, f"the broker config body is not UTF-8: {error}") \
            from None
    unknown = sorted(set(changes) - RUN_TIME_KEYS)
    if unknown or not changes:
        raise RemotingError(SYSTEM_ERROR, f"mqstore changes only {', '.join(RUN_TIME_KEYS)} "
                                          f"at run time, not {', '.join(unknown) or 'nothing'}"
                                          f"; set the others in its config file")
    value = changes[BROKER_PERMISSION_KEY]
    if not value.isdigit() or int(value) > PERMISSION_MAX:
        raise RemotingError(SYSTEM_ERROR, f"brokerPermission={value!r} must be a permission "
                                          f"0..{PERMISSION_MAX} (2 write, 4 read, 6 both)")
    front.topics.properties.update({BROKER_PERMISSION_KEY: str(int(value))})
    front.topics.read_again()
    return request.answer(SUCCESS)


async def get_broker_config(front: Front, request: Command, peer: Peer) -> Command:
    """GET_BROKER_CONFIG (26)."""
    settings = front.settings
    front.topics.read_again()
    front.topics.get(headers.optional_text(request, "topic") or "TBW102")  # reads the files
    values = {"brokerClusterName": settings.cluster_name, "brokerName": settings.broker_name,
              "brokerId": str(settings.broker_id), "brokerIP1": front.broker_address,
              "namesrvAddr": settings.namesrv_addresses,
              BROKER_PERMISSION_KEY: str(front.topics.broker_permission),
              "autoCreateTopicEnable": str(settings.topic_auto_create_enabled).lower(),
              "listenPort": str(settings.port)}
    body = "".join(f"{key}={value}\n" for key, value in sorted(values.items()))
    try:
        changed_ms = int(front.topics.properties.path.stat().st_mtime * 1000)
    except FileNotFoundError:
        changed_ms = 0
    version = json.dumps({"counter": 0, "stateVersion": 0, "timestamp": changed_ms},
                         separators=(",", ":"))
    return request.answer(SUCCESS, ext_fields={"version": version}, body=body.encode())
