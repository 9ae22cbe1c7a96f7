"""AclClientRPCHook's signature, against vectors computed here by hand: the content is
spelled out as the client builds it, then signed with the standard library's HMAC."""

from __future__ import annotations

import base64
import hashlib
import hmac

from mqstore.services.auth.remoting_signature import sign, signature_matches, signed_content

SECRET = "12345678"


def hand_signature(content: bytes) -> str:
    return base64.b64encode(hmac.new(SECRET.encode(), content, hashlib.sha1).digest()).decode()


def test_content_is_the_values_in_key_order_then_the_body() -> None:
    fields = {"topic": "Orders", "queueId": "3", "AccessKey": "rocketmq2", "b": "Orders",
              "Signature": "ignored"}
    # Keys in order: AccessKey, b, queueId, topic (upper case sorts before lower case).
    assert signed_content(fields, b"body") == b"rocketmq2" + b"Orders" + b"3" + b"Orders" + \
        b"body"


def test_a_java_client_signature_matches() -> None:
    fields = {"AccessKey": "rocketmq2", "consumerGroup": "billing", "topic": "Orders",
              "queueId": "0"}
    fields["Signature"] = hand_signature(b"rocketmq2billing0Orders")
    assert signature_matches(fields, b"", SECRET)
    assert sign(SECRET, b"rocketmq2billing0Orders") == fields["Signature"]


def test_non_ascii_values_are_signed_as_utf8() -> None:
    fields = {"AccessKey": "rocketmq2", "key": "clé"}
    fields["Signature"] = hand_signature("rocketmq2clé".encode())
    assert signature_matches(fields, b"\x00\xff", SECRET) is False  # the body counts
    fields["Signature"] = hand_signature("rocketmq2clé".encode() + b"\x00\xff")
    assert signature_matches(fields, b"\x00\xff", SECRET)


def test_unique_key_query_is_accepted_signed_and_unsigned() -> None:
    signed = {"AccessKey": "rocketmq2", "topic": "T", "key": "k", "_UNIQUE_KEY_QUERY": "true"}
    # Keys in order: AccessKey, _UNIQUE_KEY_QUERY ('_' sorts after upper case), key, topic.
    signed["Signature"] = hand_signature(b"rocketmq2" + b"true" + b"k" + b"T")
    assert signature_matches(signed, b"", SECRET)  # 5.x and 4.9.4+ sign it
    unsigned = dict(signed, Signature=hand_signature(b"rocketmq2kT"))
    assert signature_matches(unsigned, b"", SECRET)  # 4.x's header-only signature


def test_the_go_clients_unsigned_security_token_is_accepted() -> None:
    fields = {"AccessKey": "rocketmq2", "SecurityToken": "sts-token", "topic": "T"}
    fields["Signature"] = hand_signature(b"rocketmq2T")
    assert signature_matches(fields, b"", SECRET)
    fields["Signature"] = hand_signature(b"rocketmq2sts-tokenT")  # the Java client signs it
    assert signature_matches(fields, b"", SECRET)


def test_wrong_secret_changed_field_or_missing_signature_fail() -> None:
    fields = {"AccessKey": "rocketmq2", "topic": "T"}
    fields["Signature"] = hand_signature(b"rocketmq2T")
    assert not signature_matches(fields, b"", "87654321")
    assert not signature_matches(dict(fields, topic="U"), b"", SECRET)
    assert not signature_matches(dict(fields, extra="x"), b"", SECRET)
    assert not signature_matches({"AccessKey": "rocketmq2", "topic": "T"}, b"", SECRET)
