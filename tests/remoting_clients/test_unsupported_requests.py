"""A request code the server has no processor for gets REQUEST_CODE_NOT_SUPPORTED and a remark,
from the name server and from each broker: never a hang or a dropped connection."""

from __future__ import annotations

import pytest

from tests.remoting_clients import raw_remoting

pytestmark = pytest.mark.remoting_clients

UNKNOWN_CODE = 65_000


def assert_not_supported(response: raw_remoting.Response, opaque: int) -> None:
    assert response.header["code"] == raw_remoting.REQUEST_CODE_NOT_SUPPORTED, response.header
    assert response.header["flag"] & raw_remoting.RESPONSE_FLAG, response.header
    assert response.header["opaque"] == opaque, response.header
    assert str(UNKNOWN_CODE) in response.header.get("remark", ""), response.header


def test_name_server_refuses_an_unknown_code(namesrv: str) -> None:
    assert_not_supported(raw_remoting.request(namesrv, UNKNOWN_CODE, opaque=41), 41)


def test_every_broker_refuses_an_unknown_code(namesrv: str) -> None:
    brokers = raw_remoting.broker_addresses(namesrv)
    assert brokers, "the name server knows no broker"
    for opaque, broker in enumerate(brokers, start=100):
        assert_not_supported(raw_remoting.request(broker, UNKNOWN_CODE, opaque=opaque), opaque)
