"""The client side of the Broker flows, run inside a client pod of the mqstore image (the
node tests pass this file's text to `python -c` through `kubectl exec`), so producers and
consumers reach a Broker the way an application in the cluster does: through its Service
and the pods' DNS names.  Standard library and `mqstore.client` only.

    produce URL TOPIC COUNT PACE_MS   COUNT messages, or (COUNT 0) until stdin closes
    consume URL GROUP TOPIC COUNT     a consumer group polls until COUNT messages came
    check URL TOPIC WAIT_S            every acknowledged message (stdin) is there to pull
    get URL                           one JSON document (a writer's /v1/replication, say),
                                      or {"error": ...} if it cannot be fetched

With MQSTORE_ACCESS_KEY and MQSTORE_SECRET_KEY in its environment (an account of the
Broker's users Secret), every request is signed as that account; without them, unsigned.

Every line it prints is one JSON object: `produce` prints one per PUT_OK, then a summary
of every other outcome; `consume` and `check` print one summary.  A message body names its
topic and its number in the run, so a body read back identifies its send."""

from __future__ import annotations

import base64
import collections
import json
import os
import sys
import threading
import time
import urllib.request
from typing import Any

from mqstore.client import Consumer, MqstoreError, Producer
from mqstore.services.auth.http_signature import signer_for

PULL_MESSAGES_MAX = 32
"""The notifier's default `pull_messages_max`."""
RECONNECT_PAUSE_S = 0.2
"""After a failed send: the writer may be restarting; do not spin."""
CONSUME_TIMEOUT_S = 60.0
ACCESS_KEY = os.environ.get("MQSTORE_ACCESS_KEY")
SECRET_KEY = os.environ.get("MQSTORE_SECRET_KEY")
"""The account every request is signed as (both None: unsigned)."""


def emit(document: dict[str, Any]) -> None:
    print(json.dumps(document, separators=(",", ":")), flush=True)


def open_url(url: str) -> Any:
    """GET `url`, signed when KEYS are set (services/auth/http_signature.py)."""
    request = urllib.request.Request(url)
    signer = signer_for(ACCESS_KEY, SECRET_KEY)
    for name, value in (signer.headers_for_url("GET", url, None) if signer else {}).items():
        request.add_header(name, value)
    return urllib.request.urlopen(request, timeout=10)


def stop_at_end_of_input(stop: threading.Event) -> None:
    sys.stdin.read()
    stop.set()


def produce(url: str, topic: str, count: int, pace_ms: int) -> None:
    """Sends one message at a time with no client retries, so each PUT_OK printed is the
    writer's own answer to that one send; any other answer or error is only counted."""
    stop = threading.Event()
    if count == 0:
        threading.Thread(target=stop_at_end_of_input, args=(stop,), daemon=True).start()
    outcomes: collections.Counter[str] = collections.Counter()
    producer = Producer(url, retries_max=0, timeout_s=10, access_key=ACCESS_KEY,
                        secret_key=SECRET_KEY)
    sent = 0
    while not stop.is_set() and (count == 0 or sent < count):
        body = f"{topic}-{sent}"
        sent += 1
        try:
            result = producer.send(topic, body)
        except MqstoreError as error:
            # Refusals by the users file by their status (UNAUTHORIZED, FORBIDDEN).
            outcomes[error.status if error.http_status in (401, 403)
                     else type(error).__name__] += 1
            producer.close()
            producer = Producer(url, retries_max=0, timeout_s=10, access_key=ACCESS_KEY,
                        secret_key=SECRET_KEY)
            time.sleep(RECONNECT_PAUSE_S)
            continue
        outcomes[result.status] += 1
        if result.status == "PUT_OK":
            emit({"queue_id": result.queue_id, "queue_offset": result.queue_offset,
                  "physical_offset": result.physical_offset, "msg_id": result.msg_id,
                  "body": body})
        time.sleep(pace_ms / 1000)
    producer.close()
    emit({"sent": sent, "outcomes": dict(outcomes)})


def consume(url: str, group: str, topic: str, count: int) -> None:
    received: dict[str, list[int]] = {}
    deadline_s = time.monotonic() + CONSUME_TIMEOUT_S
    with Consumer(url, group, topic, access_key=ACCESS_KEY,
                        secret_key=SECRET_KEY) as consumer:
        while len(received) < count and time.monotonic() < deadline_s:
            for message in consumer.poll(max_messages=PULL_MESSAGES_MAX, wait_ms=2000):
                received[message.body.decode()] = [message.queue_id, message.queue_offset]
            consumer.commit()
        committed = consumer.positions
    emit({"received": received, "committed": {str(q): o for q, o in committed.items()}})


def pull(url: str, topic: str, queue_id: int, offset: int) -> dict[str, Any]:
    query = f"offset={offset}&max_messages={PULL_MESSAGES_MAX}"
    with open_url(f"{url}/v1/topics/{topic}/queues/{queue_id}/messages?{query}") as answer:
        document: dict[str, Any] = json.loads(answer.read())
        return document


def missing_acks(url: str, topic: str, acks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The acknowledged messages not found at their queue offset with their body and
    commit log position, pulling each queue from its lowest acknowledged offset."""
    wanted: dict[int, dict[int, dict[str, Any]]] = collections.defaultdict(dict)
    for ack in acks:
        wanted[ack["queue_id"]][ack["queue_offset"]] = ack
    missing = []
    for queue_id, by_offset in sorted(wanted.items()):
        found: dict[int, tuple[str, int]] = {}
        offset, last = min(by_offset), max(by_offset)
        while offset <= last:
            answer = pull(url, topic, queue_id, offset)
            for message in answer["messages"]:
                found[message["queue_offset"]] = (
                    base64.b64decode(message["body_base64"]).decode(),
                    message["physical_offset"])
            if answer["next_offset"] <= offset:
                break  # nothing more to read here (yet)
            offset = answer["next_offset"]
        missing += [ack for queue_offset, ack in sorted(by_offset.items())
                    if found.get(queue_offset) != (ack["body"], ack["physical_offset"])]
    return missing


def check(url: str, topic: str, wait_s: float) -> None:
    """Waits up to `wait_s` for every acknowledged message to be readable (a follower's or a
    restarted indexer's dispatch may still be catching up), then reports what is not."""
    acks = json.load(sys.stdin)
    deadline_s = time.monotonic() + wait_s
    while True:
        try:
            missing = missing_acks(url, topic, acks)
            error = ""
        except OSError as failure:  # the notifier is restarting: try again
            missing, error = acks, repr(failure)
        if not missing or time.monotonic() > deadline_s:
            break
        time.sleep(1.0)
    emit({"checked": len(acks), "missing_count": len(missing), "missing": missing[:10],
          "last_error": error})


def get(url: str) -> None:
    """The JSON document at `url`, or {"error": ...}: right after a pod is replaced, its
    DNS name may still resolve to the old pod's address for the record's TTL."""
    try:
        with open_url(url) as answer:
            emit(json.loads(answer.read()))
    except OSError as failure:
        emit({"error": repr(failure)})


def main(argv: list[str]) -> None:
    command, *args = argv
    if command == "produce":
        produce(args[0], args[1], int(args[2]), int(args[3]))
    elif command == "consume":
        consume(args[0], args[1], args[2], int(args[3]))
    elif command == "check":
        check(args[0], args[1], float(args[2]))
    elif command == "get":
        get(args[0])
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
