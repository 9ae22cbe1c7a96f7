"""RocketMQ's ACL request signature (`AclClientRPCHook`), as the server checks it.

    content   = the values (not the keys) of every ext field but `Signature`, in key order,
                concatenated, UTF-8, then the raw body bytes
    Signature = Base64(HMAC-SHA1(secretKey as UTF-8, content))

Clients differ in what they sign, so a request is accepted if any of these variants
matches (the first is tried first; the others cost an HMAC each, and only on mismatch):

    all fields                                  Java 5.x; Java 4.x without the next two
    all but `_UNIQUE_KEY_QUERY`                 Java 4.x signs its header class only, and
                                                queryMessage adds this field outside it
    all but `SecurityToken`                     the Go client sends it unsigned
    all but both
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
_VARIANTS = ((), (UNIQUE_KEY_QUERY,), (SECURITY_TOKEN,), (UNIQUE_KEY_QUERY, SECURITY_TOKEN))


def signed_content(ext_fields: Mapping[str, str], body: bytes, *,
                   left_out: tuple[str, ...] = ()) -> bytes:
    """What the client signed: ext field values in key order, then the body."""
    values = "".join(ext_fields[key] for key in sorted(ext_fields)
                     if key != SIGNATURE and key not in left_out)
    return values.encode("utf-8") + body


def sign(secret_key: str, content: bytes) -> str:
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def signature_matches(ext_fields: Mapping[str, str], body: bytes, secret_key: str) -> bool:
    """Whether the request's `Signature` is one a client holding `secret_key` made."""
    given = ext_fields.get(SIGNATURE)
    if not given:
        return False
    for left_out in _VARIANTS:
        if left_out and not all(key in ext_fields for key in left_out):
            continue
        expected = sign(secret_key, signed_content(ext_fields, body, left_out=left_out))
        if hmac.compare_digest(expected, given):
            return True
    return False
