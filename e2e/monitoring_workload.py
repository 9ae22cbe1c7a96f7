"""The traffic the monitoring test (e2e/test_node_monitoring.py) puts through a Broker's
real pods, run inside a pod of the mqstore image as `python -c <this file> ARGS`:

- a steady producer (batches of 10 messages of 1 KiB, 20 a second: about 200 KB/s),
- every `burst_every_s` a burst of `burst_bytes` in 60 KiB messages, so the writer rolls to a
  new 64 MiB segment while the dashboards are read (the preallocation panels rate over 20 s),
- a consumer that polls and commits (pulls, wakeups, dispatch),
- one malformed pull a second, which the notifier answers 400 (the HTTP-code panel).

Every request is signed as the account in MQSTORE_ACCESS_KEY / MQSTORE_SECRET_KEY (the
Broker's users Secret, through the pod's env).  Every loop stops by itself after
`duration_s`; errors are counted, not raised.  The last
line printed is a JSON report: messages stored by status, messages received, errors."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

from mqstore.client import Consumer, OutgoingMessage, Producer
from mqstore.client.errors import MqstoreError
from mqstore.services.auth.http_signature import signer_for

TOPIC = "Monitored"
STEADY_BODY_BYTES = 1024
BURST_BODY_BYTES = 60 * 1024
BURST_BATCH = 8
"""480 KiB per request: a 70 MiB burst is about 150 requests."""


ACCESS_KEY = os.environ.get("MQSTORE_ACCESS_KEY")
SECRET_KEY = os.environ.get("MQSTORE_SECRET_KEY")


def signed_get(url: str) -> urllib.request.Request:
    request = urllib.request.Request(url)
    signer = signer_for(ACCESS_KEY, SECRET_KEY)
    for name, value in (signer.headers_for_url("GET", url, None) if signer else {}).items():
        request.add_header(name, value)
    return request


class Traffic:
    def __init__(self, *, writer_url: str, notifier_url: str, deadline: float) -> None:
        self.writer_url = writer_url
        self.notifier_url = notifier_url
        self.deadline = deadline
        self.statuses: dict[str, int] = {}
        self.received = 0
        self.errors: dict[str, int] = {}
        self.lock = threading.Lock()

    def running(self) -> bool:
        return time.monotonic() < self.deadline

    def count(self, table: dict[str, int], key: str, n: int = 1) -> None:
        with self.lock:
            table[key] = table.get(key, 0) + n

    def send(self, producer: Producer, body: bytes, batch: int) -> int:
        try:
            results = producer.send_batch([OutgoingMessage(TOPIC, body) for _ in range(batch)])
        except MqstoreError as error:
            self.count(self.errors, type(error).__name__)
            time.sleep(0.5)
            return 0
        for result in results:
            self.count(self.statuses, result.status)
        return len(results) * len(body)

    def steady(self) -> None:
        with Producer(self.writer_url, retries_max=0, timeout_s=10, access_key=ACCESS_KEY,
                        secret_key=SECRET_KEY) as producer:
            while self.running():
                self.send(producer, b"s" * STEADY_BODY_BYTES, 10)
                time.sleep(0.05)

    def bursts(self, burst_bytes: int, burst_every_s: float) -> None:
        with Producer(self.writer_url, retries_max=0, timeout_s=30, access_key=ACCESS_KEY,
                        secret_key=SECRET_KEY) as producer:
            while self.running():
                started, sent = time.monotonic(), 0
                while sent < burst_bytes and self.running():
                    sent += self.send(producer, b"b" * BURST_BODY_BYTES, BURST_BATCH)
                time.sleep(max(0.0, started + burst_every_s - time.monotonic()))

    def consume(self) -> None:
        with Consumer(self.notifier_url, "monitored", TOPIC, retries_max=0, access_key=ACCESS_KEY,
                        secret_key=SECRET_KEY) as consumer:
            while self.running():
                try:
                    got = len(consumer.poll(max_messages=64, wait_ms=200))
                    consumer.commit()
                except MqstoreError as error:
                    self.count(self.errors, type(error).__name__)
                    time.sleep(0.5)
                    continue
                with self.lock:
                    self.received += got

    def bad_pulls(self) -> None:
        url = f"{self.notifier_url}/v1/topics/{TOPIC}/queues/not-a-number/messages"
        while self.running():
            try:
                urllib.request.urlopen(signed_get(url), timeout=5).close()
            except urllib.error.HTTPError as error:
                self.count(self.statuses, f"HTTP_{error.code}")
            except OSError as error:
                self.count(self.errors, type(error).__name__)
            time.sleep(1.0)


def main(argv: list[str]) -> None:
    writer_url, notifier_url, duration_s, burst_bytes, burst_every_s = argv
    traffic = Traffic(writer_url=writer_url, notifier_url=notifier_url,
                      deadline=time.monotonic() + float(duration_s))
    threads = [threading.Thread(target=traffic.steady),
               threading.Thread(target=traffic.bursts,
                                args=(int(burst_bytes), float(burst_every_s))),
               threading.Thread(target=traffic.consume),
               threading.Thread(target=traffic.bad_pulls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({"statuses": traffic.statuses, "received": traffic.received,
                      "errors": traffic.errors}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
