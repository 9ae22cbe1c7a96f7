"""REGISTER_BROKER bodies (services/namesrv/registration.py): JSON, compressed, CRC, and a
seeded fuzz of both forms (nothing but RegistrationError ever comes out)."""

from __future__ import annotations

import contextlib
import json
import random
import zlib

import pytest

from mqstore.services.namesrv import registration
from mqstore.services.namesrv.registration import RegistrationError
from mqstore.services.namesrv.route_table import QueueData

INFLATED_MAX = 1 << 20


def plain_body(topics: dict[str, dict[str, object]]) -> bytes:
    return json.dumps({"topicConfigSerializeWrapper": {
        "topicConfigTable": topics,
        "dataVersion": {"counter": 3, "timestamp": 99, "stateVersion": 0}},
        "filterServerList": []}).encode()


def test_a_plain_body_gives_queue_data_and_the_version() -> None:
    body = plain_body({"t": {"topicName": "t", "readQueueNums": 8, "writeQueueNums": 4,
                             "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                             "order": False, "attributes": {}}})
    configs = registration.decode(body, compressed=False, inflated_bytes_max=INFLATED_MAX)
    assert configs.topics == {"t": QueueData(read_queue_nums=8, write_queue_nums=4, perm=6)}
    assert configs.data_version == {"counter": 3, "timestamp": 99, "stateVersion": 0}


def test_a_compressed_body_round_trips() -> None:
    topics = {"t": QueueData(read_queue_nums=8, write_queue_nums=4, perm=7),
              "u": QueueData(read_queue_nums=1, write_queue_nums=1, perm=6)}
    body = registration.encode_compressed(topics, {"counter": 5, "timestamp": 1})
    configs = registration.decode(body, compressed=True, inflated_bytes_max=INFLATED_MAX)
    assert configs.topics == topics
    assert configs.data_version == {"counter": 5, "timestamp": 1}


def test_a_compressed_body_is_read_as_such_whatever_the_flag_says() -> None:
    """RocketMQ 5.5.0's broker sends `compressed=false` with a deflated body."""
    topics = {"t": QueueData(read_queue_nums=2, write_queue_nums=2, perm=6)}
    body = registration.encode_compressed(topics, {"counter": 1, "timestamp": 1})
    configs = registration.decode(body, compressed=False, inflated_bytes_max=INFLATED_MAX)
    assert configs.topics == topics


def test_a_compressed_body_inflating_past_the_bound_is_refused() -> None:
    body = zlib.compress(b"\0" * (INFLATED_MAX * 4))
    with pytest.raises(RegistrationError, match="inflates past"):
        registration.decode(body, compressed=True, inflated_bytes_max=INFLATED_MAX)


def test_the_crc32_is_checked_when_given() -> None:
    registration.check_crc32(b"abc", None)
    registration.check_crc32(b"abc", "0")
    registration.check_crc32(b"abc", str(zlib.crc32(b"abc")))  # 0x352441c2: bit 31 clear
    # RocketMQ's UtilAll.crc32 keeps 31 bits: a body whose CRC-32 has bit 31 set
    high = next(body for body in (bytes([n]) for n in range(256)) if zlib.crc32(body) >> 31)
    registration.check_crc32(high, str(zlib.crc32(high) & 0x7FFFFFFF))
    with pytest.raises(RegistrationError, match="crc32 not match"):
        registration.check_crc32(high, str(zlib.crc32(high)))
    with pytest.raises(RegistrationError, match="crc32 not match"):
        registration.check_crc32(b"abc", "1")


@pytest.mark.parametrize("body", [b"[]", b"{", b'{"topicConfigSerializeWrapper":1}',
                                  b'{"topicConfigSerializeWrapper":{"topicConfigTable":[1]}}',
                                  plain_body({"t": {"readQueueNums": "x"}}),
                                  plain_body({"t": {"readQueueNums": 1 << 40}})])
def test_malformed_plain_bodies_are_refused(body: bytes) -> None:
    with pytest.raises(RegistrationError):
        registration.decode(body, compressed=False, inflated_bytes_max=INFLATED_MAX)


def test_fuzz_both_forms() -> None:
    rng = random.Random(25)
    seeds = [plain_body({"t": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}),
             zlib.decompress(registration.encode_compressed(
                 {"t": QueueData(read_queue_nums=4, write_queue_nums=4, perm=6)}, {}))]
    for _ in range(2_000):
        seed = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            seed[rng.randrange(len(seed))] = rng.randrange(256)
        for compressed, body in ((False, bytes(seed)), (True, zlib.compress(bytes(seed)))):
            with contextlib.suppress(RegistrationError):
                registration.decode(body, compressed=compressed,
                                    inflated_bytes_max=INFLATED_MAX)
