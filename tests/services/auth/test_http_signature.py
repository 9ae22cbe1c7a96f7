"""Signed HTTP requests: the string to sign spelled out by hand, signed with the standard
library; the client's headers and the server's check agree with it."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from mqstore.services.auth.http_signature import (
    canonical_query,
    sign_headers,
    signer_for,
)

SECRET = "s3cr3t-key"
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_headers_sign_method_path_query_time_and_body() -> None:
    body = b'{"topic":"Orders"}'
    headers = sign_headers(access_key="consumer1", secret_key=SECRET, method="get",
                           target="/v1/groups/b%2Fc/offsets?topic=Or%20ders&a=2&a=1",
                           body=body, now_ms=1_700_000_000_123)
    body_sha256 = hashlib.sha256(body).hexdigest()
    text = ("MQSTORE-HMAC-SHA256\n1700000000123\nGET\n/v1/groups/b%2Fc/offsets\n"
            f"a=1&a=2&topic=Or%20ders\n{body_sha256}").encode()
    expected = base64.b64encode(hmac.new(SECRET.encode(), text, hashlib.sha256).digest())
    assert headers == {"X-Mqstore-Access-Key": "consumer1",
                       "X-Mqstore-Timestamp-Ms": "1700000000123",
                       "X-Mqstore-Content-Sha256": body_sha256,
                       "X-Mqstore-Signature": expected.decode()}


def test_no_body_hashes_the_empty_string() -> None:
    headers = sign_headers(access_key="a", secret_key=SECRET, method="GET", target="/v1/x",
                           body=None, now_ms=1)
    assert headers["X-Mqstore-Content-Sha256"] == EMPTY_SHA256


def test_the_canonical_query_sorts_and_encodes() -> None:
    assert canonical_query([("topic", "a b"), ("key", "é/~")]) == "key=%C3%A9%2F~&topic=a%20b"
    assert canonical_query([]) == ""


def test_a_signer_needs_both_keys_or_neither() -> None:
    assert signer_for(None, None) is None
    with pytest.raises(ValueError, match="both"):
        signer_for("consumer1", None)
