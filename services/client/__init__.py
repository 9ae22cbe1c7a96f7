"""`mqstore.client`: Python producers for the mqstore services (a consumer comes later).

    from mqstore.client import OutgoingMessage, Producer

    with Producer("http://127.0.0.1:8081") as producer:
        producer.send("Orders", b"body", tags="created", keys=("order-17",))
        producer.send_batch([OutgoingMessage("Orders", b"a"), OutgoingMessage("Audit", b"b")])

`AsyncProducer` has the same API as coroutines.  Errors: see `errors.py`.
"""

from mqstore.services.common.wire import WireMessage as OutgoingMessage

from .async_producer import AsyncProducer
from .errors import (
    BadRequestError,
    DiskFullError,
    MqstoreError,
    ServerError,
    UnavailableError,
)
from .producer import Producer
from .results import SendResult

__all__ = [
    "AsyncProducer",
    "BadRequestError",
    "DiskFullError",
    "MqstoreError",
    "OutgoingMessage",
    "Producer",
    "SendResult",
    "ServerError",
    "UnavailableError",
]
