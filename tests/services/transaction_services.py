"""The three services as real processes with the remoting front, its writer link through a
`ForwardGate` (tests/services/forward_gate.py), and a transactional producer speaking raw
remoting frames (tests/remoting/client.py): what tests/services/test_transaction_kill9.py
kills and restarts.

The notifier is started either without a check pass in sight (`checking=False`: an hour
apart, so nothing but the test's own requests moves a half before the kill) or checking
every `CHECK_INTERVAL_MS` the halves older than `TIMEOUT_MS` (the test's halves are born a
minute ago, so every one without an op is asked at the first pass).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.frame import Command
from mqstore.storage.format.message import decode_stored
from tests.integration.three_services import SMALL_STORE, free_ports
from tests.processes import MQSTORE
from tests.remoting.client import RemotingClient, properties, pull_header, records, send_header
from tests.services.forward_gate import ForwardGate

TOPIC = "Orders"
QUEUES = 4
GROUP = "payments"
COMMIT, ROLLBACK = 8, 12
TRANSACTION_PREPARED_TYPE = 0x4
BORN_AGO_MS = 60_000
CHECK_INTERVAL_MS = 300
TIMEOUT_MS = 1_000
QUIET_PASSES = 4
"""Check passes without a single CHECK_TRANSACTION_STATE that end the producer's watch: no
half is left without an op (an unended half is asked at every pass)."""
TIMEOUT_S = 30.0
CHECKING_ENV = {"MQSTORE_REMOTING__TRANSACTION_CHECK_INTERVAL_MS": str(CHECK_INTERVAL_MS),
                "MQSTORE_REMOTING__TRANSACTION_TIMEOUT_MS": str(TIMEOUT_MS),
                "MQSTORE_REMOTING__TRANSACTION_CHECK_MAX": "1000"}
NOT_CHECKING_ENV = {"MQSTORE_REMOTING__TRANSACTION_CHECK_INTERVAL_MS": "3600000"}


class TransactionServices:
    """Writer, indexer and notifier on one data directory; the notifier's remoting front
    forwards through `gate`."""

    def __init__(self, tmp_path: Path, *, index_enabled: bool = True) -> None:
        self.data_dir = tmp_path / "data"
        self.ports = free_ports(("writer", "indexer", "notifier", "remoting", "forward"))
        self.config = tmp_path / "mqstore.yaml"
        self.config.write_text(json.dumps({"data_dir": str(self.data_dir), "store": {
            **SMALL_STORE, "index_enabled": index_enabled}}))
        self.logs = tmp_path / "logs"
        self.logs.mkdir()
        self.gate = ForwardGate(self.ports["forward"])
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.starts = 0

    @property
    def remoting(self) -> str:
        return f"127.0.0.1:{self.ports['remoting']}"

    def __enter__(self) -> TransactionServices:
        self.gate.__enter__()
        try:
            self.start("indexer")
            self.start("writer")
            self.start("notifier", NOT_CHECKING_ENV)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            for name in ("notifier", "writer", "indexer"):
                process = self.processes.get(name)
                if process is not None and process.poll() is None:
                    process.send_signal(signal.SIGTERM)
                    try:
                        process.wait(60)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()
        finally:
            self.gate.__exit__()

    def start(self, name: str, extra: dict[str, str] | None = None) -> None:
        environment = dict(os.environ)
        for service in ("writer", "indexer", "notifier"):
            environment[f"MQSTORE_{service.upper()}__HOST"] = "127.0.0.1"
            environment[f"MQSTORE_{service.upper()}__PORT"] = str(self.ports[service])
        environment.update({
            "MQSTORE_NOTIFIER__INDEXER_URL": f"http://127.0.0.1:{self.ports['indexer']}",
            "MQSTORE_STORE__STORE_HOST": self.remoting,
            "MQSTORE_WRITER__FORWARD_PORT": str(self.ports["forward"]),
            "MQSTORE_REMOTING__HOST": "127.0.0.1",
            "MQSTORE_REMOTING__PORT": str(self.ports["remoting"]),
            "MQSTORE_REMOTING__WRITER_ADDRESS": f"127.0.0.1:{self.gate.port}",
            "MQSTORE_REMOTING__WRITER_TIMEOUT_MS": "60000", **(extra or {})})
        self.starts += 1
        log = open(self.logs / f"{name}-{self.starts}.log", "wb")  # noqa: SIM115 (kept open)
        self.processes[name] = subprocess.Popen(
            [*MQSTORE, name, "--config", str(self.config)],
            env=environment, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self._wait_ready(name)

    def kill_notifier(self) -> None:
        """kill -9 of the notifier, the process that holds every transaction step."""
        process = self.processes["notifier"]
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(TIMEOUT_S) == -signal.SIGKILL

    def _wait_ready(self, name: str) -> None:
        deadline = time.monotonic() + 60
        url = f"http://127.0.0.1:{self.ports[name]}/readyz"
        while time.monotonic() < deadline:
            assert self.processes[name].poll() is None, f"{name} exited: {self.log(name)}"
            try:
                with urllib.request.urlopen(url, timeout=1) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise AssertionError(f"{name} not ready: {self.log(name)}")

    def log(self, name: str) -> str:
        logs = sorted(self.logs.glob(f"{name}-*.log"), key=lambda p: p.stat().st_mtime)
        return logs[-1].read_text()[-3000:] if logs else "(no log)"


async def send_half(client: RemotingClient, key: str) -> Command:
    """A `TransactionMQProducer`'s half: answered once the writer stored it."""
    header = send_header(TOPIC, 0, sysflag=TRANSACTION_PREPARED_TYPE, props=properties(
        TRAN_MSG="true", PGROUP=GROUP, UNIQ_KEY=key, WAIT="true"))
    header.update(a=GROUP, g=str(int(time.time() * 1000) - BORN_AGO_MS))
    answer = await client.request(codes.SEND_MESSAGE_V2, header, key.encode())
    assert answer.code == codes.SUCCESS, answer.remark
    return answer


async def end(client: RemotingClient, fields: dict[str, str], state: int, *,
              from_check: bool) -> None:
    """END_TRANSACTION (oneway), naming the half by `fields` (a send's answer, or a check's
    header)."""
    position = fields.get("commitLogOffset") or str(int(fields["msgId"][16:], 16))
    half_offset = fields.get("tranStateTableOffset") or fields["queueOffset"]
    await client.request(codes.END_TRANSACTION, {
        "producerGroup": GROUP, "tranStateTableOffset": half_offset,
        "commitLogOffset": position, "commitOrRollback": str(state),
        "fromTransactionCheck": str(from_check).lower(), "msgId": fields["msgId"],
        "transactionId": fields.get("transactionId", "")}, oneway=True)


async def answer_checks(address: str, decisions: dict[str, int],
                        expected: set[str]) -> Counter[str]:
    """A producer of GROUP answering every check with `decisions[key]`, until the keys in
    `expected` were all asked and then QUIET_PASSES passes asked nothing; the keys asked."""
    client = await RemotingClient.connect(address)
    try:
        beat = await client.request(codes.HEART_BEAT, body=json.dumps({
            "clientID": "127.0.0.1@transactions", "consumerDataSet": [],
            "producerDataSet": [{"groupName": GROUP}]}).encode())
        assert beat.code == codes.SUCCESS, beat.remark
        asked: Counter[str] = Counter()
        deadline = time.monotonic() + TIMEOUT_S
        quiet_s = QUIET_PASSES * CHECK_INTERVAL_MS / 1000
        while True:
            assert time.monotonic() < deadline, f"checks never settled: asked {asked}"
            try:
                check = await asyncio.wait_for(client.pushed.get(), quiet_s)
            except TimeoutError:
                if expected <= set(asked):
                    return asked
                continue
            if check.code != codes.CHECK_TRANSACTION_STATE:
                continue
            key = decode_stored(check.body, 0).properties["UNIQ_KEY"]
            assert check.ext_fields["transactionId"] == key
            asked[key] += 1
            await end(client, check.ext_fields, decisions[key], from_check=True)
    finally:
        await client.close()


async def delivered(address: str) -> Counter[str]:
    """The UNIQ_KEY of every message a consumer pulls from TOPIC's queues, from offset 0."""
    client = await RemotingClient.connect(address)
    keys: Counter[str] = Counter()
    try:
        for queue_id in range(QUEUES):
            offset = 0
            while True:
                answer = await client.request(codes.PULL_MESSAGE, pull_header(
                    TOPIC, queue_id, offset, suspend_ms=0))
                if answer.code != codes.SUCCESS:
                    assert answer.code == codes.PULL_NOT_FOUND, (answer.code, answer.remark)
                    break
                for message in records(answer.body):
                    assert message.sysflag & 0xC == COMMIT, message
                    keys[message.properties["UNIQ_KEY"]] += 1
                offset = int(answer.ext_fields["nextBeginOffset"])
    finally:
        await client.close()
    return keys
