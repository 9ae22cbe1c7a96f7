"""The frame codec: RocketMQ's own bytes decode, and what we write decodes back."""

from __future__ import annotations

import json

import pytest

from mqstore.services.notifier.remoting import frame
from mqstore.services.notifier.remoting.frame import (
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    Command,
    FrameError,
    decode,
    encode,
)

# HEART_BEAT with a binary header and one ext field k=v, as the Java client writes it
# (the remoting spec's verified example).
JAVA_BINARY_HEARTBEAT = bytes.fromhex(
    "00000021" "0100001d" "0022" "00" "0000" "00000001" "00000000" "00000000" "00000008"
    "0001" "6b" "00000001" "76")


def test_a_java_binary_header_decodes() -> None:
    command = decode(JAVA_BINARY_HEARTBEAT[4:])
    assert (command.code, command.language, command.version, command.opaque, command.flag) \
        == (34, "JAVA", 0, 1, 0)
    assert command.ext_fields == {"k": "v"}
    assert command.remark is None
    assert command.serialize_type == SERIALIZE_ROCKETMQ


def test_the_same_command_encodes_to_the_java_bytes() -> None:
    command = Command(34, 1, 0, {"k": "v"}, version=0, serialize_type=SERIALIZE_ROCKETMQ)
    assert b"".join(encode(command)) == JAVA_BINARY_HEARTBEAT


def test_a_java_json_header_decodes_with_its_extra_keys() -> None:
    header = (b'{"code":11,"extFields":{"queueId":"0","maxMsgNums":"32"},"flag":0,'
              b'"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":513}')
    frame = len(header).to_bytes(4, "big") + header + b"body"
    command = decode(frame)
    assert (command.code, command.opaque, command.version) == (11, 7, 513)
    assert command.ext_fields == {"queueId": "0", "maxMsgNums": "32"}
    assert command.body == b"body"


def test_a_go_json_header_with_an_empty_remark_decodes() -> None:
    header = (b'{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"",'
              b'"extFields":{"topic":"t"}}')
    command = decode(len(header).to_bytes(4, "big") + header)
    assert (command.code, command.language, command.ext_fields) == (105, "GO", {"topic": "t"})


@pytest.mark.parametrize("serialize_type", [SERIALIZE_JSON, SERIALIZE_ROCKETMQ])
def test_an_answer_round_trips_in_the_request_encoding(serialize_type: int) -> None:
    request = Command(14, opaque=-5, ext_fields={"topic": "t"}, serialize_type=serialize_type)
    answer = request.answer(22, ext_fields={"offset": "9"}, body=b"\x00\x01",
                            remark="not found")
    decoded = decode(b"".join(encode(answer))[4:])
    assert (decoded.code, decoded.opaque, decoded.flag, decoded.remark) == (22, -5, 1,
                                                                          "not found")
    assert decoded.ext_fields == {"offset": "9"}
    assert decoded.body == b"\x00\x01"
    assert decoded.serialize_type == serialize_type


def test_json_answers_write_ext_values_as_strings_and_no_spaces() -> None:
    answer = Command(0, 3, 1, {"queueOffset": "7"})
    frame = b"".join(encode(answer))
    header = json.loads(frame[8:])
    assert header["extFields"] == {"queueOffset": "7"}
    assert b" " not in frame


def test_numeric_json_ext_values_are_read_as_text() -> None:
    header = b'{"code":30,"opaque":1,"flag":0,"extFields":{"queueId":3,"committed":true}}'
    command = decode(len(header).to_bytes(4, "big") + header)
    assert command.ext_fields == {"queueId": "3", "committed": "true"}


@pytest.mark.parametrize(("payload", "problem"), [
    (b"\x00\x00", "no header-length word"),
    (b"\x00\x00\x00\x10{}", "runs past"),
    (b"\x02\x00\x00\x02{}", "serialize type 2"),
    (b"\x00\x00\x00\x03{x}", "not JSON"),
    (b"\x00\x00\x00\x02[]", "not an object"),
    (b"\x01\x00\x00\x05" + b"\x00" * 5, "shorter than its fixed"),
])
def test_malformed_frames_are_refused_naming_the_problem(payload: bytes, problem: str) -> None:
    with pytest.raises(FrameError, match=problem):
        decode(payload)


def test_a_binary_ext_length_past_the_header_is_refused() -> None:
    command = Command(34, 1, 0, {"key": "value"}, serialize_type=SERIALIZE_ROCKETMQ)
    frame = bytearray(b"".join(encode(command))[4:])
    frame[-15] = 0x7F  # the ext fields' total length, now far past the header
    with pytest.raises(FrameError, match="extFields"):
        decode(bytes(frame))


def _json_frame(header: bytes) -> bytes:
    return len(header).to_bytes(4, "big") + header


@pytest.mark.parametrize("header", [
    b'{"code":11,"opaque":1,"remark":"\\ud800 lone surrogate"}',  # orjson refuses it
    b'{"code":11,"opaque":1,"flag":0,"extFields":{"n":NaN}}',
    b'{"code":11,"opaque":1,"extFields":{"n":123456789012345678901234567890}}',  # > 64 bits
    '{"code":11,"opaque":1}'.encode("utf-16"),  # json detects UTF-16
    b'{"code":11,"opaque":1,"code":12}',  # a repeated key: the last one counts
    b'{"code":11,"opaque":1,"extFields":{"a":1.5,"b":true,"c":null,"d":[1]}}',
])
def test_json_headers_decode_as_the_standard_parser_decodes_them(header: bytes) -> None:
    """The front parses with orjson and falls back to json for what orjson refuses: the
    command is the one json's document gives, whichever parser read it."""
    command = decode(_json_frame(header))
    document = json.loads(header)
    assert command.code == int(document["code"])
    assert command.opaque == int(document["opaque"])
    assert command.remark == document.get("remark")
    expected_ext = {key: value if isinstance(value, str) else
                    ("true" if value is True else json.dumps(value, separators=(",", ":")))
                    for key, value in (document.get("extFields") or {}).items()
                    if value is not None}
    assert command.ext_fields == expected_ext


@pytest.mark.parametrize("header", [b'{"code":', b"[1,2]", b"\xff\xfe\x00", b"[" * 100_000])
def test_a_header_neither_parser_takes_is_a_frame_error(header: bytes) -> None:
    with pytest.raises(FrameError):
        decode(_json_frame(header))


def test_a_java_send_header_is_parsed_by_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 5.x send's header (its UNIQ_KEY holds runs of 20+ digits in a string) takes the fast
    parser: the standard one is never called for it."""

    def refuse(header: bytes) -> object:
        raise AssertionError(f"the standard parser took {header[:60]!r}")

    monkeypatch.setattr(frame, "_loads_reference", refuse)
    header = (b'{"code":310,"extFields":{"a":"pg","b":"t","i":"UNIQ_KEY\\u0001FD0000000000000'
              b'000000000000000020A9E4E0E2F2A8C15844A0000\\u0002WAIT\\u0001true\\u0002","e":"1"},'
              b'"flag":0,"language":"JAVA","opaque":5,"serializeTypeCurrentRPC":"JSON",'
              b'"version":513}')
    command = decode(_json_frame(header))
    assert command.ext_fields["i"].startswith("UNIQ_KEY\x01FD000000")
