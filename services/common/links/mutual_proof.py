"""`MutualProof`: the one handshake by which two processes that share a secret prove it to
each other before a link carries anything: the writer's forward listener and the remoting
front (services/common/links/forward_secret.py), a replication master and its follower
(services/writer/replication_handshake.py).  Only the magic and the labels differ.

The listener speaks first.  Big-endian; each message is sent whole (as a frame of
services/common/links/framing.py on the forward link, as plain bytes on the replication link,
whose stream after the handshake is RocketMQ's HA layout):

    listener → dialer  HELLO, 40 bytes
        0   4   magic            per link: b"MQFH" forward, b"MQRH" replication
        4   1   version          1
        5   3   reserved         zero
        8   32  listener_nonce   random
    dialer → listener  DIALER_PROOF, 64 bytes
        0   32  dialer_nonce     random
        32  32  proof            HMAC-SHA256(secret, dialer_label + listener_nonce + dialer_nonce)
    listener → dialer  LISTENER_PROOF, 32 bytes (only if the dialer's proof matched;
                       otherwise the listener closes the connection)
        0   32  proof            HMAC-SHA256(secret, listener_label + listener_nonce + dialer_nonce)

Each proof covers both fresh nonces and a label naming who proves, so a recorded proof is
good for no other connection (the listener's nonce) and no other side (the label), and a
fake listener learns nothing it chose (the dialer's nonce).  Proofs are compared in constant
time.  The functions here do no I/O; each link sends and reads the messages its own way.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
import struct

VERSION = 1
NONCE_SIZE_BYTES = 32
PROOF_SIZE_BYTES = 32
HELLO = struct.Struct(">4sB3x32s")
DIALER_PROOF = struct.Struct(">32s32s")
LISTENER_PROOF = struct.Struct(">32s")
assert HELLO.size == 40
assert DIALER_PROOF.size == 64
assert LISTENER_PROOF.size == 32
assert hashlib.sha256().digest_size == PROOF_SIZE_BYTES


class ProofError(ValueError):
    """The other side does not hold the same secret, or does not speak this handshake."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MutualProof:
    """The handshake of one kind of link."""

    magic: bytes
    listener: str
    """Who listens, as messages and labels name it ("writer", "master")."""
    dialer: str
    """Who connects ("front", "follower")."""
    port_hint: str
    """What a dialer that met the wrong magic should check, for its error message."""

    def __post_init__(self) -> None:
        assert len(self.magic) == 4

    def _proof(self, secret: bytes, side: str, listener_nonce: bytes,
               dialer_nonce: bytes) -> bytes:
        assert len(listener_nonce) == NONCE_SIZE_BYTES
        assert len(dialer_nonce) == NONCE_SIZE_BYTES
        label = b"mqstore " + side.encode()
        return hmac.new(secret, label + listener_nonce + dialer_nonce, hashlib.sha256).digest()

    def hello(self) -> tuple[bytes, bytes]:
        """(HELLO to send, the listener's nonce to keep)."""
        listener_nonce = os.urandom(NONCE_SIZE_BYTES)
        return HELLO.pack(self.magic, VERSION, listener_nonce), listener_nonce

    def dialer_proof(self, secret: bytes, hello: bytes) -> tuple[bytes, bytes, bytes]:
        """The dialer's answer to `hello`: (DIALER_PROOF to send, listener nonce, dialer
        nonce), or ProofError for anything but this link's version-1 hello."""
        magic, version, listener_nonce = HELLO.unpack(hello)
        if magic != self.magic or version != VERSION:
            raise ProofError(f"not a {self.listener}'s hello (magic {magic!r}, version "
                             f"{version}); {self.port_hint}")
        dialer_nonce = os.urandom(NONCE_SIZE_BYTES)
        mine = self._proof(secret, self.dialer, listener_nonce, dialer_nonce)
        return DIALER_PROOF.pack(dialer_nonce, mine), listener_nonce, dialer_nonce

    def listener_proof(self, secret: bytes, listener_nonce: bytes, answer: bytes) -> bytes:
        """The LISTENER_PROOF to send back if `answer` proves the secret; ProofError if not."""
        dialer_nonce, theirs = DIALER_PROOF.unpack(answer)
        expected = self._proof(secret, self.dialer, listener_nonce, dialer_nonce)
        if not hmac.compare_digest(expected, theirs):
            raise ProofError(f"the {self.dialer}'s proof does not match this {self.listener}'s "
                             f"secret")
        return LISTENER_PROOF.pack(self._proof(secret, self.listener, listener_nonce,
                                               dialer_nonce))

    def check_listener(self, secret: bytes, listener_nonce: bytes, dialer_nonce: bytes,
                       answer: bytes) -> None:
        """ProofError unless `answer` is the listener's proof of the same secret."""
        (theirs,) = LISTENER_PROOF.unpack(answer)
        expected = self._proof(secret, self.listener, listener_nonce, dialer_nonce)
        if not hmac.compare_digest(expected, theirs):
            raise ProofError(f"the {self.listener}'s proof does not match this "
                             f"{self.dialer}'s secret")
