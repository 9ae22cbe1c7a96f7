"""The replication handshake: a follower proves it holds the replication secret before the
master sends it any log byte, and the master proves the same to the follower.

Both sides hold one secret (`replication.secret_file`).  Each proof is an HMAC-SHA256 keyed
with it over both sides' fresh random nonces and a label naming who proves, so a proof is
good for one connection only (the master's nonce), cannot be replayed to the other side (the
label), and cannot be chosen by a fake master to learn anything (the follower's nonce).
Proofs are compared in constant time.  Big-endian, before any report or frame:

    master → follower  HELLO, 40 bytes
        0   4   magic          b"MQRH"
        4   1   version        1
        5   3   reserved       zero
        8   32  master_nonce   random

    follower → master  FOLLOWER_PROOF, 64 bytes
        0   32  follower_nonce random
        32  32  proof          HMAC(secret, b"mqstore follower" + master_nonce + follower_nonce)

    master → follower  MASTER_PROOF, 32 bytes (only if the follower's proof matched;
                       otherwise the master closes the connection)
        0   32  proof          HMAC(secret, b"mqstore master" + master_nonce + follower_nonce)

Then the follower, having checked the master's proof, sends its first report
(replication_protocol.py) and the stream runs as before.  Without a secret (allowed only on
a loopback listener, replication_settings.py) the key is empty: the exchange then proves
nothing, but both sides run one code path.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct

MAGIC = b"MQRH"
VERSION = 1
NONCE_SIZE_BYTES = 32
PROOF_SIZE_BYTES = 32
HELLO = struct.Struct(">4sB3x32s")
FOLLOWER_PROOF = struct.Struct(">32s32s")
MASTER_PROOF = struct.Struct(">32s")
assert HELLO.size == 40
assert FOLLOWER_PROOF.size == 64
assert MASTER_PROOF.size == 32
assert hashlib.sha256().digest_size == PROOF_SIZE_BYTES

FOLLOWER_LABEL = b"mqstore follower"
MASTER_LABEL = b"mqstore master"


class HandshakeError(ValueError):
    """The other side does not hold the same secret, or does not speak this protocol."""


def new_nonce() -> bytes:
    return os.urandom(NONCE_SIZE_BYTES)


def proof(secret: bytes, *, label: bytes, master_nonce: bytes, follower_nonce: bytes) -> bytes:
    assert len(master_nonce) == NONCE_SIZE_BYTES
    assert len(follower_nonce) == NONCE_SIZE_BYTES
    return hmac.new(secret, label + master_nonce + follower_nonce, hashlib.sha256).digest()


def encode_hello(master_nonce: bytes) -> bytes:
    return HELLO.pack(MAGIC, VERSION, master_nonce)


def decode_hello(data: bytes) -> bytes:
    """The master's nonce, or HandshakeError for anything but a version-1 hello."""
    magic, version, master_nonce = HELLO.unpack(data)
    if magic != MAGIC or version != VERSION:
        raise HandshakeError(f"not a replication master's hello (magic {magic!r}, version "
                             f"{version}); is the address the master's replication port, "
                             f"and both sides this version?")
    return bytes(master_nonce)


def follower_answer(secret: bytes, master_nonce: bytes) -> tuple[bytes, bytes]:
    """(FOLLOWER_PROOF bytes to send, the follower's nonce to check the master's proof)."""
    follower_nonce = new_nonce()
    mine = proof(secret, label=FOLLOWER_LABEL, master_nonce=master_nonce,
                 follower_nonce=follower_nonce)
    return FOLLOWER_PROOF.pack(follower_nonce, mine), follower_nonce


def check_follower(secret: bytes, master_nonce: bytes, data: bytes) -> bytes:
    """The MASTER_PROOF to send back if `data` proves the secret; HandshakeError if not."""
    follower_nonce, theirs = FOLLOWER_PROOF.unpack(data)
    expected = proof(secret, label=FOLLOWER_LABEL, master_nonce=master_nonce,
                     follower_nonce=follower_nonce)
    if not hmac.compare_digest(expected, theirs):
        raise HandshakeError("the follower's proof does not match this master's "
                             "replication secret")
    return MASTER_PROOF.pack(proof(secret, label=MASTER_LABEL, master_nonce=master_nonce,
                                   follower_nonce=follower_nonce))


def check_master(secret: bytes, *, master_nonce: bytes, follower_nonce: bytes,
                 data: bytes) -> None:
    """HandshakeError unless `data` is the master's proof of the same secret."""
    (theirs,) = MASTER_PROOF.unpack(data)
    expected = proof(secret, label=MASTER_LABEL, master_nonce=master_nonce,
                     follower_nonce=follower_nonce)
    if not hmac.compare_digest(expected, theirs):
        raise HandshakeError("the master's proof does not match this follower's "
                             "replication secret")
