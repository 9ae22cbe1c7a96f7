"""The properties RocketMQ's broker stamps on what it stores, stamped by the front.

RocketMQ 5.5.0 (`AbstractSendMessageProcessor#buildMsgContext`, `SendMessageProcessor`):

| property     | value                           | stamped on                               |
|--------------|---------------------------------|------------------------------------------|
| `MSG_REGION` | `remoting.region_id`            | every single send and every reply        |
| `TRACE_ON`   | `remoting.trace_on`             | every single send and every reply        |
| `CLUSTER`    | `remoting.cluster_name`         | every single send, not replies           |

A client's consume-trace hook reads `MSG_REGION` and `TRACE_ON` from the messages it
consumes, and a responder builds its reply's topic (`<CLUSTER>_REPLY_TOPIC`) from the
request's `CLUSTER`: without them message trace loses its consume records and request-reply
fails (reply.py).  A batch's records carry only their own properties, as RocketMQ's do.

The common send names none of the three: the stamps are appended as one constant suffix;
a send that names any has them replaced, as RocketMQ's `putProperty` replaces them.
"""

from __future__ import annotations

from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.storage.format.properties import decode_properties, encode_properties

PROPERTY_REGION = "MSG_REGION"
PROPERTY_TRACE_ON = "TRACE_ON"
PROPERTY_CLUSTER = "CLUSTER"
_NAMES = tuple(f"{name}\x01".encode() for name in (PROPERTY_REGION, PROPERTY_TRACE_ON,
                                                    PROPERTY_CLUSTER))


class PropertyStamps:
    def __init__(self, settings: RemotingSettings) -> None:
        self.region_id = settings.region_id
        self.trace_on = "true" if settings.trace_on else "false"
        self._reply = {PROPERTY_REGION: self.region_id, PROPERTY_TRACE_ON: self.trace_on}
        self._send = {**self._reply, PROPERTY_CLUSTER: settings.cluster_name}
        self._send_suffix = encode_properties(self._send)
        self._reply_suffix = encode_properties(self._reply)

    def stamped(self, properties: bytes, *, reply: bool = False) -> bytes:
        """`properties` (encoded, as the client sent them) with the stamps of a send, or of
        a reply."""
        if any(name in properties for name in _NAMES):
            decoded = decode_properties(properties)
            decoded.update(self._reply if reply else self._send)
            return encode_properties(decoded)
        if properties and not properties.endswith(b"\x02"):
            properties += b"\x02"  # 4.9.1-5.1.4 clients omit the last separator
        return properties + (self._reply_suffix if reply else self._send_suffix)
