"""`mqstore.client`: Python producers and consumers for the mqstore services.

    from mqstore.client import OutgoingMessage, Producer

    with Producer("http://127.0.0.1:8081") as producer:
        producer.send("Orders", b"body", tags="created", keys=("order-17",))
        producer.send_batch([OutgoingMessage("Orders", b"a"), OutgoingMessage("Audit", b"b")])

    with Consumer("http://127.0.0.1:8083", "billing", "Orders") as consumer:
        for message in consumer.poll(max_messages=32, wait_ms=5000):
            ...
        consumer.commit()             # at least once: uncommitted messages come again
    # consumer.nack(message): it comes again after a delay (retries.py), past the max in
    # the group's dead letter queue

`AsyncProducer` and `AsyncConsumer` have the same APIs as coroutines.  Errors: see
`errors.py`.
"""

from mqstore.client.async_consumer import AsyncConsumer
from mqstore.client.async_producer import AsyncProducer
from mqstore.client.consumer import Consumer
from mqstore.client.consumer_calls import ReceivedMessage
from mqstore.client.errors import (
    BadRequestError,
    DiskFullError,
    MqstoreError,
    ServerError,
    UnavailableError,
)
from mqstore.client.producer import Producer
from mqstore.client.results import SendResult
from mqstore.client.retries import NackResult
from mqstore.services.common.http.batch_wire import WireMessage as OutgoingMessage

__all__ = [
    "AsyncConsumer",
    "AsyncProducer",
    "BadRequestError",
    "Consumer",
    "DiskFullError",
    "MqstoreError",
    "NackResult",
    "OutgoingMessage",
    "Producer",
    "ReceivedMessage",
    "SendResult",
    "ServerError",
    "UnavailableError",
]
