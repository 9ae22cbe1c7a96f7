from __future__ import annotations

import pytest

from mqstore.storage.errors import MessageIllegalError
from mqstore.storage.format.properties import decode_properties, encode_properties


def test_round_trip_writes_the_trailing_separator() -> None:
    encoded = encode_properties({"TAGS": "a", "KEYS": "k1 k2", "üser": "välue"})
    assert encoded.endswith(b"\x02")
    assert decode_properties(encoded) == {"TAGS": "a", "KEYS": "k1 k2", "üser": "välue"}


def test_reads_the_variant_without_trailing_separator() -> None:
    assert decode_properties(b"TAGS\x01a\x02KEYS\x01k") == {"TAGS": "a", "KEYS": "k"}


def test_decoder_skips_pieces_rocketmq_skips() -> None:
    assert decode_properties(b"ab\x02\x01bc\x02xy\x01\x02k\x01v\x02") == {"k": "v"}


@pytest.mark.parametrize("properties", [{"": "v"}, {"k": ""}, {"k\x01": "v"}, {"k": "v\x02"}])
def test_unencodable_properties_are_illegal(properties: dict[str, str]) -> None:
    with pytest.raises(MessageIllegalError):
        encode_properties(properties)
