"""What authentication costs the servers: CPU µs per message, with and without a users file.

    .venv/bin/python bench/auth_cost.py [--runs 3] [--messages 100000] [--batch 256]
                                        [--senders 8]

Each run starts the three services twice on fresh directories (harness.MqstoreServices,
async flush, uvloop), once without and once with a users file (`auth.users_file`), and
drives the same load at both from asyncio clients in this process, signing every request
when the users file is on (a non-admin account with PUB|SUB on the topics, so the
permission check runs in full).  Cases, 1 KiB bodies:

  remoting-batch   SEND_BATCH_MESSAGE of `--batch` messages, `--senders` in flight, to 8
                   queues: client → front (notifier) → writer's forward listener; signed
                   with RocketMQ's AclClientRPCHook signature (HMAC-SHA1 over the header
                   values and the whole batch body)
  remoting-pull    PULL_MESSAGE of 32 from offset 0 of every queue, every message of the case
                   above; signed the same way (no body)
  http-batch       POST /v1/topics/{t}/messages/batch of `--batch` JSON messages to the
                   writer, `--senders` in flight; signed HTTP (HMAC-SHA256 over the request
                   line, the timestamp and the body's SHA-256)
  http-pull        GET the notifier's /v1/topics/{t}/queues/{q}/messages of 32, every message
                   of remoting-batch; signed HTTP

Printed per case: the CPU µs per message (user + system, from /proc) of the processes on
the case's path (sends: writer + indexer + notifier, or writer + indexer over HTTP; pulls:
the notifier), without and with users, the ratio and the difference, as medians over the
runs, with the load average; JSON (every process's share too) goes to bench/results/.
The end-to-end difference is small beside the noise of a shared machine, so the script also
times the servers' check alone, in this process (`check-*`: the remoting front's
RemotingAccess.check on a signed request, the HTTP middleware's signature and body hash),
per message of one request of each case.

Before the cases, each setup waits until its processes are idle (a new writer prepares its
next segment in the background, which would be charged to the first case).  The figures
are ratios taken under the same load, not a timed pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import statistics
import sys
import tempfile
import time
import timeit
import urllib.parse
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp
import harness
from harness import BODY

sys.path.append(str(Path(__file__).parents[1]))
from mqstore.services.auth import load_users
from mqstore.services.auth.http_signature import (
    canonical_query,
    sign_headers,
    signature,
    string_to_sign,
)
from mqstore.services.auth.remoting_signature import sign, signed_content
from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.access import RemotingAccess
from mqstore.services.notifier.remoting.frame import Command
from tests.remoting.client import RemotingClient, batch_body, properties, send_header

TOPIC = "BenchAuth"
HTTP_TOPIC = "BenchAuthHttp"
GROUP = "bench"
QUEUES = 8
PULL_BATCH = 32
STORE = {"flush_mode": "async"}
CASES = ("remoting-batch", "remoting-pull", "http-batch", "http-pull")
PATHS = {"remoting-batch": ("writer", "indexer", "notifier"), "remoting-pull": ("notifier",),
         "http-batch": ("writer", "indexer"), "http-pull": ("notifier",)}
"""The processes that do a case's work; the others' CPU in that time is background."""
IDLE_CPU_S_PER_S = 0.1
IDLE_WAIT_S_MAX = 20.0
USER = ("bench-user", "bench-user-secret")
ADMIN = ("bench-admin", "bench-admin-secret")
USERS_FILE = f"""\
accounts:
  - accessKey: {USER[0]}
    secretKey: {USER[1]}
    topicPerms: [{TOPIC}=PUB|SUB, {HTTP_TOPIC}=PUB|SUB]
    groupPerms: [{GROUP}=SUB]
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
"""
"""The bench user may send and read its two topics; the admin creates the topic (and is the
account the notifier signs its notice-stream requests with)."""

Keys = tuple[str, str] | None


def signed_ext(keys: Keys, ext: dict[str, str], body: bytes) -> dict[str, str]:
    """`ext` as AclClientRPCHook sends it: with AccessKey and Signature (unchanged if None)."""
    if keys is None:
        return ext
    fields = dict(ext, AccessKey=keys[0])
    return dict(fields, Signature=sign(keys[1], signed_content(fields, body)))


def http_headers(keys: Keys, method: str, target: str, body: bytes | None) -> dict[str, str]:
    if keys is None:
        return {}
    return sign_headers(access_key=keys[0], secret_key=keys[1], method=method, target=target,
                        body=body)


async def create_topic(address: str, admin: Keys) -> None:
    client = await RemotingClient.connect(address)
    ext = {"topic": TOPIC, "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES),
           "perm": "6"}
    answer = await client.request(codes.UPDATE_AND_CREATE_TOPIC, signed_ext(admin, ext, b""))
    assert answer.code == codes.SUCCESS, answer.remark
    await client.close()


async def remoting_batch(address: str, keys: Keys, *, messages: int, batch: int,
                         senders: int) -> int:
    """Sends `messages` (a multiple of batch × QUEUES) in batches; returns the count."""
    clients = [await RemotingClient.connect(address) for _ in range(4)]
    batches = [(index, index % QUEUES) for index in range(messages // batch)]

    async def sender(worker: int) -> None:
        client = clients[worker % len(clients)]
        while batches:
            index, queue_id = batches.pop()
            body = batch_body([(BODY, properties(UNIQ_KEY=f"{index:016X}{i:016X}"))
                               for i in range(batch)])
            ext = send_header(TOPIC, queue_id, props="WAIT\x01true\x02", batch=True)
            answer = await client.request(codes.SEND_BATCH_MESSAGE,
                                          signed_ext(keys, ext, body), body)
            assert answer.code == codes.SUCCESS, answer.remark

    await asyncio.gather(*(sender(worker) for worker in range(senders)))
    for client in clients:
        await client.close()
    return messages // batch * batch


async def wait_dispatched(address: str, keys: Keys, per_queue: int) -> None:
    client = await RemotingClient.connect(address)
    for queue_id in range(QUEUES):
        while True:
            ext = {"topic": TOPIC, "queueId": str(queue_id)}
            answer = await client.request(codes.GET_MAX_OFFSET, signed_ext(keys, ext, b""))
            assert answer.code == codes.SUCCESS, answer.remark
            if int(answer.ext_fields["offset"]) >= per_queue:
                break
            await asyncio.sleep(0.05)
    await client.close()


async def remoting_pull(address: str, keys: Keys, *, per_queue: int) -> int:
    client = await RemotingClient.connect(address)

    async def queue(queue_id: int) -> int:
        offset = 0
        while offset < per_queue:
            ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id),
                   "queueOffset": str(offset), "maxMsgNums": str(PULL_BATCH), "sysFlag": "4",
                   "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
                   "subVersion": "0", "expressionType": "TAG"}
            answer = await client.request(codes.PULL_MESSAGE, signed_ext(keys, ext, b""))
            assert answer.code == codes.SUCCESS, (answer.code, answer.remark)
            offset = int(answer.ext_fields["nextBeginOffset"])
        return offset

    total = sum(await asyncio.gather(*(queue(queue_id) for queue_id in range(QUEUES))))
    await client.close()
    return total


async def http_batch(writer_url: str, keys: Keys, *, messages: int, batch: int,
                     senders: int) -> int:
    target = f"/v1/topics/{HTTP_TOPIC}/messages/batch"
    payload = json.dumps({"messages": [{"body": BODY.decode("ascii")}] * batch}).encode()
    remaining = [messages // batch]

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=senders)) as session:
        async def sender() -> None:
            while remaining[0] > 0:
                remaining[0] -= 1
                headers = {"Content-Type": "application/json",
                           **http_headers(keys, "POST", target, payload)}
                async with session.post(writer_url + target, data=payload,
                                        headers=headers) as answer:
                    assert answer.status == 200, await answer.text()
                    await answer.read()

        await asyncio.gather(*(sender() for _ in range(senders)))
    return messages // batch * batch


async def http_pull(notifier_url: str, keys: Keys, *, per_queue: int) -> int:
    async with aiohttp.ClientSession() as session:
        async def queue(queue_id: int) -> int:
            offset = 0
            while offset < per_queue:
                query = urllib.parse.urlencode({"offset": offset, "max_messages": PULL_BATCH})
                target = f"/v1/topics/{TOPIC}/queues/{queue_id}/messages?{query}"
                async with session.get(notifier_url + target, headers=http_headers(
                        keys, "GET", target, None)) as answer:
                    assert answer.status == 200, await answer.text()
                    document = await answer.json()
                offset = document["next_offset"]
            return offset

        return sum(await asyncio.gather(*(queue(queue_id) for queue_id in range(QUEUES))))


def wait_idle(services: harness.MqstoreServices) -> float:
    """Waits until the processes use under IDLE_CPU_S_PER_S of CPU over a second (the
    indexer alone polls at about 0.05 when nothing moves); returns the seconds waited (at
    most IDLE_WAIT_S_MAX, then it measures anyway)."""
    started = time.monotonic()
    before = sum(services.cpu_seconds().values())
    while time.monotonic() - started < IDLE_WAIT_S_MAX:
        time.sleep(1.0)
        after = sum(services.cpu_seconds().values())
        if after - before < IDLE_CPU_S_PER_S:
            break
        before = after
    return time.monotonic() - started


def measure(name: str, services: harness.MqstoreServices,
            run: Callable[[], Coroutine[Any, Any, int]]) -> dict[str, Any]:
    before = services.cpu_seconds()
    started = time.monotonic()
    messages = asyncio.run(run())
    elapsed = time.monotonic() - started
    after = services.cpu_seconds()
    per_service = {name: (after[name] - before[name]) * 1e6 / messages for name in after}
    return {"messages": messages, "msg_per_s": messages / elapsed,
            "path_cpu_us_per_msg": sum(per_service[one] for one in PATHS[name]),
            "server_cpu_us_per_msg": sum(per_service.values()),
            "cpu_us_per_msg_by_service": per_service}


def one_setup(arguments: argparse.Namespace, *, users: bool, run: int) -> list[dict[str, Any]]:
    keys: Keys = USER if users else None
    admin: Keys = ADMIN if users else None
    messages = arguments.messages // (arguments.batch * QUEUES) * arguments.batch * QUEUES
    per_queue = messages // QUEUES
    rows = []
    services = harness.MqstoreServices(store=STORE,
                                       users_file_text=USERS_FILE if users else None)
    with harness.running(services):
        address = services.remoting_address
        asyncio.run(create_topic(address, admin))
        idle_s = wait_idle(services)
        cases: dict[str, Callable[[], Coroutine[Any, Any, int]]] = {
            "remoting-batch": lambda: remoting_batch(address, keys, messages=messages,
                                                     batch=arguments.batch,
                                                     senders=arguments.senders),
            "remoting-pull": lambda: remoting_pull(address, keys, per_queue=per_queue),
            "http-batch": lambda: http_batch(services.url("writer"), keys, messages=messages,
                                             batch=arguments.batch, senders=arguments.senders),
            "http-pull": lambda: http_pull(services.url("notifier"), keys,
                                           per_queue=per_queue)}
        for name, case in cases.items():
            row = {"case": name, "users": users, "run": run, "idle_wait_s": idle_s,
                   **measure(name, services, case)}
            rows.append(row)
            print(f"run {run} {name:<15} users {'on ' if users else 'off'} "
                  f"{row['msg_per_s']:>9,.0f} msg/s {row['path_cpu_us_per_msg']:>6.2f} µs/msg "
                  f"(all processes {row['server_cpu_us_per_msg']:.2f})", flush=True)
            if name == "remoting-batch":
                asyncio.run(wait_dispatched(address, keys, per_queue))
            idle_s = wait_idle(services)
    return rows


def check_costs(batch: int) -> dict[str, float]:
    """µs per message of the servers' checks alone, for one request of each case."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "plain_acl.yml"
        path.write_text(USERS_FILE)
        access = RemotingAccess(load_users(path), served_codes=frozenset())
    batch_bytes = batch_body([(BODY, properties(UNIQ_KEY=f"{i:032X}")) for i in range(batch)])
    send = Command(codes.SEND_BATCH_MESSAGE, 1, 0, signed_ext(USER, send_header(
        TOPIC, 0, props="WAIT\x01true\x02", batch=True), batch_bytes), batch_bytes)
    pull_ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "queueOffset": "0",
                "maxMsgNums": str(PULL_BATCH), "sysFlag": "4", "commitOffset": "0",
                "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
                "expressionType": "TAG"}
    pull = Command(codes.PULL_MESSAGE, 1, 0, signed_ext(USER, pull_ext, b""), b"")
    payload = json.dumps({"messages": [{"body": BODY.decode("ascii")}] * batch}).encode()

    def http_check(method: str, body: bytes) -> None:
        content_sha256 = hashlib.sha256(body).hexdigest()
        signature(USER[1], string_to_sign(
            method=method, path=f"/v1/topics/{TOPIC}/messages/batch",
            query=canonical_query([("offset", "0"), ("max_messages", "32")]),
            timestamp_ms=1, content_sha256=content_sha256))

    checks = {"check-remoting-batch": (lambda: access.check(send, "127.0.0.1:1"), batch),
              "check-remoting-pull": (lambda: access.check(pull, "127.0.0.1:1"), PULL_BATCH),
              "check-http-batch": (lambda: http_check("POST", payload), batch),
              "check-http-pull": (lambda: http_check("GET", b""), PULL_BATCH)}
    costs = {}
    for name, (check, messages) in checks.items():
        repeat = 200
        best_s = min(timeit.repeat(check, number=repeat, repeat=5)) / repeat
        costs[name] = best_s * 1e6 / messages
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--senders", type=int, default=8)
    arguments = parser.parse_args()
    harness.install_uvloop()
    conditions = harness.Conditions.now()
    rows: list[dict[str, Any]] = []
    for run in range(arguments.runs):
        for users in ((False, True) if run % 2 == 0 else (True, False)):
            rows += one_setup(arguments, users=users, run=run)
    conditions.finish()
    print(conditions.describe())
    print(f"{'case':<15} {'µs/msg no users':>16} {'µs/msg users':>13} {'ratio':>6} "
          f"{'+µs/msg':>8}")
    for name in CASES:
        off = statistics.median(row["path_cpu_us_per_msg"] for row in rows
                                if row["case"] == name and not row["users"])
        on = statistics.median(row["path_cpu_us_per_msg"] for row in rows
                               if row["case"] == name and row["users"])
        print(f"{name:<15} {off:>16.2f} {on:>13.2f} {on / off:>6.2f} {on - off:>8.2f}")
    costs = check_costs(arguments.batch)
    for name, cost in costs.items():
        print(f"{name:<21} {cost:>6.3f} µs/msg (the check alone, best of 5)")
    rows.append({"case": "checks", **costs})
    print(harness.write_results("auth_cost", conditions, vars(arguments), rows))


if __name__ == "__main__":
    main()
