"""Binary batch and result codecs: round trips, and every truncation or extension refused."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.services.common.http.batch_wire import (
    STATUS_NAMES,
    BatchCodec,
    ResultCodec,
    ResultRow,
    WireFormatError,
    WireMessage,
    msg_id,
)
from mqstore.storage import PutStatus
from mqstore.storage.format.message import offset_msg_id

topics = st.text(alphabet="abcXYZ019%|_-", min_size=1, max_size=40)
utf8_texts = st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=1,
                     max_size=30)
messages = st.builds(
    WireMessage,
    topic=topics,
    body=st.binary(max_size=300),
    queue_id=st.none() | st.integers(0, 2**31 - 1),
    tags=st.none() | utf8_texts,
    keys=st.lists(utf8_texts, max_size=4).map(tuple),
    properties=st.none() | st.dictionaries(utf8_texts, utf8_texts, min_size=1, max_size=4),
)
batches = st.lists(messages, min_size=1, max_size=8)
rows = st.builds(ResultRow, status=st.sampled_from(STATUS_NAMES),
                 queue_id=st.integers(0, 2**31 - 1), queue_offset=st.integers(0, 2**63 - 1),
                 physical_offset=st.integers(0, 2**63 - 1),
                 store_timestamp_ms=st.integers(0, 2**63 - 1))
hosts = st.binary(min_size=8, max_size=8) | st.binary(min_size=20, max_size=20)


@given(batches)
@settings(max_examples=200, deadline=None)
def test_batch_round_trip(batch: list[WireMessage]) -> None:
    decoded = BatchCodec.decode(BatchCodec.encode(batch), messages_max=len(batch))
    assert decoded == batch


@given(batches, st.data())
@settings(max_examples=200, deadline=None)
def test_every_truncation_and_extension_of_a_batch_is_refused(batch: list[WireMessage],
                                                              data: st.DataObject) -> None:
    encoded = BatchCodec.encode(batch)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(WireFormatError):
        BatchCodec.decode(encoded[:cut], messages_max=len(batch))
    extra = data.draw(st.binary(min_size=1, max_size=20))
    with pytest.raises(WireFormatError):
        BatchCodec.decode(encoded + extra, messages_max=len(batch))


def test_every_truncation_of_one_full_message_is_refused() -> None:
    """Exhaustive over one message that uses every field."""
    encoded = BatchCodec.encode([WireMessage("T", b"body", 1, "tag", ("k1", "k2"),
                                             {"a": "1", "b": "2"})])
    for cut in range(len(encoded)):
        with pytest.raises(WireFormatError):
            BatchCodec.decode(encoded[:cut], messages_max=1)


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_junk_is_refused_or_decoded_exactly(junk: bytes) -> None:
    """Any input either raises WireFormatError (nothing else) or decodes to messages that
    encode back to the very same bytes: no byte is ignored or guessed."""
    for data in (junk, BatchCodec.HEADER.pack(b"MQSB", 1, 2) + junk):
        try:
            decoded = BatchCodec.decode(data, messages_max=4)
        except WireFormatError:
            continue
        assert BatchCodec.encode(decoded) == data


@pytest.mark.parametrize(("data", "message"), [
    (b"MQSB\x00\x02\x00\x00\x00\x01", "version 2 is not supported"),
    (b"MQSB\x00\x01\x00\x00\x00\x00", "count 0 must be in 1..4"),
    (b"MQSB\x00\x01\x00\x00\x00\x05", "count 5 must be in 1..4"),
    (b"MQSB\x00\x01\x00\x00\x00\x02" + bytes(15), "claims 2 messages but has only 15 bytes"),
    (b"MQSB\x00\x01\x00\x00\x00\x01" + struct.pack(">iBHHHI", -1, 1, 0, 0, 0, 0) + b"\xff",
     "topic is not ASCII"),
    (b"MQSB\x00\x01\x00\x00\x00\x01" + struct.pack(">iBHHHI", -1, 1, 2, 0, 0, 0) + b"T\xc3(",
     "tags is not UTF-8"),
    (b"MQSB\x00\x01\x00\x00\x00\x01" + struct.pack(">iBHHHI", -1, 1, 0, 0, 2, 0) + b"T"
     + b"\x00\x01a\x00\x01b\x00\x01a\x00\x01c", "a property name appears twice"),
])
def test_named_batch_errors(data: bytes, message: str) -> None:
    with pytest.raises(WireFormatError, match=message):
        BatchCodec.decode(data, messages_max=4)


@pytest.mark.parametrize("message", [
    WireMessage("", b"x"), WireMessage("t" * 256, b"x"), WireMessage("T", b"x", queue_id=-2),
    WireMessage("T", b"x", keys="abc"), WireMessage("Tö", b"x"),  # type: ignore[arg-type]
])
def test_encode_refuses_what_the_layout_cannot_hold(message: WireMessage) -> None:
    with pytest.raises(ValueError):  # UnicodeEncodeError or a width check
        BatchCodec.encode([message])


@given(st.lists(rows, max_size=20), hosts)
@settings(max_examples=200, deadline=None)
def test_result_round_trip_and_truncations(result_rows: list[ResultRow], host: bytes) -> None:
    encoded = ResultCodec.encode(result_rows, store_host_packed=host)
    assert ResultCodec.decode(encoded) == (host, result_rows)
    for cut in range(len(encoded)):
        with pytest.raises(WireFormatError):
            ResultCodec.decode(encoded[:cut])
    with pytest.raises(WireFormatError):
        ResultCodec.decode(encoded + b"\0")


def test_status_codes_cover_the_store_and_msg_id_is_the_stores() -> None:
    # The store's statuses, then the writer's topic refusals (services/writer/topic_gate.py).
    assert set(STATUS_NAMES) == {status.value for status in PutStatus} | {
        "TOPIC_NOT_EXIST", "NO_PERMISSION"}
    host = bytes([127, 0, 0, 1]) + (10911).to_bytes(4, "big")
    assert msg_id(host, 12345) == offset_msg_id(host, 12345)


def test_unknown_result_status_is_refused() -> None:
    host = bytes(8)
    encoded = bytearray(ResultCodec.encode([("PUT_OK", 1, 2, 3, 4)], store_host_packed=host))
    encoded[ResultCodec.HEADER.size + len(host)] = len(STATUS_NAMES)
    with pytest.raises(WireFormatError, match="unknown status code"):
        ResultCodec.decode(bytes(encoded))
