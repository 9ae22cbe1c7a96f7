"""`mqstore notifier --config FILE` as a process: serves, answers probes, stops on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from tests.processes import MQSTORE
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config


def _config(tmp_path: Path, store_dir: Path, event_loop: str) -> Path:
    small = indexer_config()
    path = tmp_path / "mqstore.yaml"
    path.write_text(json.dumps({  # JSON is YAML
        "data_dir": str(store_dir),
        "store": {name: getattr(small, name) for name in (
            "segment_size_bytes", "message_body_size_bytes_max", "properties_size_bytes_max",
            "put_batch_size_bytes_max", "consume_queue_file_size_bytes",
            "index_hash_slot_count", "index_count_max")},
        "notifier": {"host": "127.0.0.1", "port": 0, "indexer_url": "",
                     "event_loop": event_loop}}))
    return path


def _listening_port(process: subprocess.Popen[bytes]) -> int:
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        assert line, "the notifier exited before listening"
        record = json.loads(line)
        if record["msg"] == "listening":
            return int(record["port"])
    raise AssertionError("no 'listening' line within 30 s")


@pytest.mark.parametrize("event_loop", ["uvloop", "asyncio"])
def test_the_notifier_process_serves_and_stops_on_sigterm(tmp_path: Path, store_dir: Path,
                                                          event_loop: str) -> None:
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        assert writer.put(Message("Orders", 0, b"hello")).ok
        wait_dispatched(indexer, writer.committed_position)
    process = subprocess.Popen([*MQSTORE, "notifier",
                                "--config", str(_config(tmp_path, store_dir, event_loop))],
                               stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{_listening_port(process)}"
        with urllib.request.urlopen(f"{base}/readyz", timeout=10) as ready:
            assert json.load(ready) == {"status": "ready", "pid": process.pid}
        with urllib.request.urlopen(f"{base}/v1/topics/Orders/queues/0/messages?offset=0",
                                    timeout=10) as pulled:
            answer = json.load(pulled)
        assert (answer["status"], answer["max_offset"]) == ("FOUND", 1)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.stderr is not None
    tail = [json.loads(line)["msg"] for line in process.stderr.read().splitlines()]
    # The remoting front (on by default) stops with the app, between the two.
    assert tail[-3:] == ["stopping", "remoting stopped", "stopped"]


def test_a_missing_config_file_is_a_usage_error(tmp_path: Path) -> None:
    finished = subprocess.run([*MQSTORE, "notifier",
                               "--config", str(tmp_path / "nope.yaml")],
                              capture_output=True, text=True, timeout=60, check=False)
    assert finished.returncode == 2
    assert "cannot read the config file" in finished.stderr
