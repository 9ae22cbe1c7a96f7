"""The forward link's layout: requests and answers round-trip; short frames are refused."""

from __future__ import annotations

import pytest

from mqstore.services.common.http.batch_wire import WireFormatError
from mqstore.services.common.links.forward_wire import (
    KIND_BATCH,
    ForwardAnswer,
    ForwardRequest,
    decode_answer,
    decode_request,
    encode_answer,
    encode_request,
)


def test_a_request_round_trips() -> None:
    request = ForwardRequest(9, KIND_BATCH, 3, 0x301, -1, 1_700_000_000_000, 2,
                             "10.0.0.1:51000", "Orders", b"WAIT\x01true\x02", b"\x00" * 40)
    frame = b"".join(encode_request(request))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert decode_request(frame[4:]) == request


def test_an_answer_round_trips() -> None:
    answer = ForwardAnswer(7, "FLUSH_DISK_TIMEOUT", [(0, 1024, 5), (1, 2048, 5)], "slow disk")
    frame = encode_answer(answer)
    assert decode_answer(frame[4:]) == answer


def test_a_truncated_request_is_refused() -> None:
    request = ForwardRequest(1, 0, 0, 0, 0, 0, 0, "", "Orders", b"props", b"body")
    frame = b"".join(encode_request(request))[4:]
    with pytest.raises(WireFormatError, match="runs past"):
        decode_request(frame[:40])
    with pytest.raises(WireFormatError, match="shorter"):
        decode_request(frame[:10])


def test_an_answer_whose_counts_do_not_fill_it_is_refused() -> None:
    frame = encode_answer(ForwardAnswer(1, "PUT_OK", [(0, 0, 0)], ""))
    with pytest.raises(WireFormatError, match="do not fill"):
        decode_answer(frame[4:-1])
