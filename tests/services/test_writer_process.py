"""`mqstore writer --config FILE` as a real process: SIGTERM drains, a second writer exits 2."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.client import MqstoreError, Producer
from mqstore.storage import MessageStore
from mqstore.storage.config import StoreConfig
from tests.processes import MQSTORE

STORE_SECTION = {"segment_size_bytes": 1 << 20, "message_body_size_bytes_max": 65536,
                 "properties_size_bytes_max": 4096, "put_batch_size_bytes_max": 262144,
                 "consume_queue_file_size_bytes": 20 * 1024, "index_hash_slot_count": 1024,
                 "index_count_max": 4096}
START_TIMEOUT_S = 30


def _config_file(tmp_path: Path, *, flush_mode: str, event_loop: str = "uvloop") -> Path:
    path = tmp_path / "mqstore.yaml"
    document = {"data_dir": str(tmp_path / "data"),
                "writer": {"port": 0, "host": "127.0.0.1", "event_loop": event_loop},
                "store": {**STORE_SECTION, "flush_mode": flush_mode}}
    path.write_text(json.dumps(document))  # JSON is YAML
    return path


class WriterProcess:
    """`mqstore writer` in a subprocess; its JSON log lines are collected from stderr."""

    def __init__(self, config: Path) -> None:
        self.process = subprocess.Popen(
            [*MQSTORE, "writer", "--config", str(config)],
            stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)
            self.lines.put(line)

    def url(self) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                assert self.process.poll() is None, f"writer exited: {''.join(self.stderr)}"
                continue
            record = json.loads(line)
            if record["msg"] == "listening":
                return f"http://127.0.0.1:{record['port']}"
        raise AssertionError(f"writer did not start: {''.join(self.stderr)}")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)


@pytest.fixture
def writers() -> Iterator[list[WriterProcess]]:
    started: list[WriterProcess] = []
    yield started
    for writer in started:
        if writer.process.poll() is None:
            writer.process.kill()
            writer.process.wait()


def _produce_until_refused(url: str, acknowledged: list[tuple[int, bytes]],
                           stop: threading.Event) -> None:
    with Producer(url, retries_max=0, timeout_s=5) as producer:
        index = 0
        while True:
            body = f"message {index}".encode() * 20
            try:
                result = producer.send("Shutdown", body, queue_id=index % 4)
            except MqstoreError:
                if stop.is_set():
                    return
                raise
            acknowledged.append((result.physical_offset, body))
            index += 1


@pytest.mark.parametrize(("flush_mode", "event_loop"), [("sync", "uvloop"),
                                                       ("async", "asyncio")])
def test_sigterm_drains_and_every_acknowledged_message_survives(
        tmp_path: Path, writers: list[WriterProcess], flush_mode: str, event_loop: str) -> None:
    writer = WriterProcess(_config_file(tmp_path, flush_mode=flush_mode, event_loop=event_loop))
    writers.append(writer)
    url = writer.url()
    acknowledged: list[tuple[int, bytes]] = []
    stopping = threading.Event()
    producer = threading.Thread(target=_produce_until_refused,
                                args=(url, acknowledged, stopping))
    producer.start()
    deadline = time.monotonic() + 10
    while len(acknowledged) < 300 and time.monotonic() < deadline:
        time.sleep(0.01)
    stopping.set()
    assert writer.stop() == 0, "".join(writer.stderr)  # while the producer still sends
    producer.join(10)
    assert not producer.is_alive()
    assert len(acknowledged) >= 300
    data = tmp_path / "data"
    assert not (data / "abort").exists(), "a graceful stop removes the abort marker"
    messages = [json.loads(line)["msg"] for line in writer.stderr]
    assert messages[-2:] == ["stopping", "stopped"]
    with MessageStore.open(data, StoreConfig(**STORE_SECTION)) as store:  # type: ignore[arg-type]
        assert store.recovery_report.mode.value == "normal"
        for physical_offset, body in acknowledged:
            assert bytes(store.message_at(physical_offset).body) == body


def test_second_writer_on_the_same_directory_exits_2(tmp_path: Path,
                                                      writers: list[WriterProcess]) -> None:
    config = _config_file(tmp_path, flush_mode="async")
    first = WriterProcess(config)
    writers.append(first)
    first.url()
    second = subprocess.run([*MQSTORE, "writer", "--config", str(config)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert second.returncode == 2
    assert "mqstore writer: " in second.stderr
    assert "another writer holds the store lock" in second.stderr
    assert first.process.poll() is None  # the first is unharmed
    assert first.stop() == 0


def test_bad_config_exits_2_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("data_dir: /tmp/x\nstore:\n  flush_mode: sometimes\n")
    result = subprocess.run([*MQSTORE, "writer",
                             "--config", str(path)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 2
    assert f"mqstore writer: {path}: store.flush_mode: 'sometimes' is not one of" in result.stderr
