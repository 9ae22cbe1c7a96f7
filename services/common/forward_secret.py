"""The forward link's credential: before the writer takes a send on its forward listener, the
front proves it holds the secret the writer published in the data directory, and the writer
proves the same back (a process squatting on the port cannot swallow sends).

Why a secret file in the data directory: the front already needs that directory (it reads
the store there), so the file reaches it under `mqstore up`, in the operator's pod (one
volume, one user for all containers) and in any hand-made layout, with nothing to provision;
its mode is 0600, so it opens the forward port to exactly the processes that could already
open the commit log as its owner.  A Unix socket would give the same rule, but not over the
TCP port the settings, `up` and the operator already name, and not for a data directory
whose path is over the 107 bytes a socket path may hold.  The writer makes a new secret at
every start (`publish_secret`) and removes it at stop; the front reads it at every connect.

Handshake, as frames of services/common/framing.py (a 4-byte length, then the payload),
big-endian, before any request:

    writer → front  HELLO, 40 bytes
        0   4   magic          b"MQFH"
        4   1   version        1
        5   3   reserved       zero
        8   32  writer_nonce   random
    front → writer  FRONT_PROOF, 64 bytes
        0   32  front_nonce    random
        32  32  proof          HMAC-SHA256(secret, b"mqstore front" + writer_nonce + front_nonce)
    writer → front  WRITER_PROOF, 32 bytes (only if the front's proof matched; otherwise
                    the writer closes the connection)
        0   32  proof          HMAC-SHA256(secret, b"mqstore writer" + writer_nonce + front_nonce)

Each proof covers both fresh nonces and a label naming who proves (as the replication
handshake, services/writer/replication_handshake.py), so a recorded proof is good for no
other connection and no other side; proofs are compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import struct
from pathlib import Path

from mqstore.services.common.framing import FramedStream, TransportError, framed

SECRET_FILE_NAME = "forward-secret"
SECRET_SIZE_BYTES = 32
"""256 random bits, written as 64 hex digits: beyond guessing, offline or online."""
MAGIC = b"MQFH"
VERSION = 1
NONCE_SIZE_BYTES = 32
HELLO = struct.Struct(">4sB3x32s")
FRONT_PROOF = struct.Struct(">32s32s")
WRITER_PROOF = struct.Struct(">32s")
assert HELLO.size == 40
assert FRONT_PROOF.size == 64
assert WRITER_PROOF.size == 32
assert hashlib.sha256().digest_size == WRITER_PROOF.size
FRONT_LABEL = b"mqstore front"
WRITER_LABEL = b"mqstore writer"


class ForwardAuthError(TransportError):
    """The other side of the forward link does not hold the same secret."""


def secret_path(data_dir: Path) -> Path:
    return data_dir / SECRET_FILE_NAME


def publish_secret(data_dir: Path) -> bytes:
    """A new secret, written to `data_dir`'s secret file (owner-only, replaced atomically)."""
    secret = secrets.token_hex(SECRET_SIZE_BYTES).encode()
    final = secret_path(data_dir)
    temporary = final.with_name(f"{SECRET_FILE_NAME}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(secret + b"\n")
    os.replace(temporary, final)
    return secret


def withdraw_secret(data_dir: Path, secret: bytes) -> None:
    """Remove the secret file if it still holds `secret` (a newer writer's is left alone)."""
    path = secret_path(data_dir)
    try:
        if path.read_bytes().strip() == secret:
            path.unlink()
    except FileNotFoundError:
        pass


def read_secret(path: Path) -> bytes:
    """The secret the writer published; OSError if there is none (the writer is not up)."""
    secret = path.read_bytes().strip()
    if len(secret) < SECRET_SIZE_BYTES:
        raise OSError(f"{path} holds {len(secret)} bytes, not a secret (the writer writes "
                      f"{2 * SECRET_SIZE_BYTES}); is the writer starting?")
    return secret


def _proof(secret: bytes, *, label: bytes, writer_nonce: bytes, front_nonce: bytes) -> bytes:
    assert len(writer_nonce) == NONCE_SIZE_BYTES
    assert len(front_nonce) == NONCE_SIZE_BYTES
    return hmac.new(secret, label + writer_nonce + front_nonce, hashlib.sha256).digest()


async def _exact_frame(stream: FramedStream, layout: struct.Struct, what: str) -> bytes:
    frame = await stream.read_frame(frame_size_bytes_max=layout.size)
    if frame is None or len(frame) != layout.size:
        raise ForwardAuthError(f"expected the {layout.size}-byte {what}, got "
                               f"{'nothing' if frame is None else f'{len(frame)} bytes'}")
    return frame


async def check_front(stream: FramedStream, secret: bytes) -> None:
    """The writer's side: ForwardAuthError (close the connection) unless the peer proves."""
    writer_nonce = os.urandom(NONCE_SIZE_BYTES)
    await stream.write(framed(HELLO.pack(MAGIC, VERSION, writer_nonce)))
    front_nonce, theirs = FRONT_PROOF.unpack(await _exact_frame(stream, FRONT_PROOF,
                                                                "front proof"))
    expected = _proof(secret, label=FRONT_LABEL, writer_nonce=writer_nonce,
                      front_nonce=front_nonce)
    if not hmac.compare_digest(expected, theirs):
        raise ForwardAuthError("the peer's proof does not match the forward secret")
    await stream.write(framed(_proof(secret, label=WRITER_LABEL, writer_nonce=writer_nonce,
                                      front_nonce=front_nonce)))


async def prove_front(stream: FramedStream, secret: bytes) -> None:
    """The front's side: ForwardAuthError unless the listener is the writer of `secret`."""
    magic, version, writer_nonce = HELLO.unpack(await _exact_frame(stream, HELLO, "hello"))
    if magic != MAGIC or version != VERSION:
        raise ForwardAuthError(f"not a writer's forward listener (magic {magic!r}, version "
                               f"{version}); is writer_address its forward port?")
    front_nonce = os.urandom(NONCE_SIZE_BYTES)
    mine = _proof(secret, label=FRONT_LABEL, writer_nonce=writer_nonce,
                  front_nonce=front_nonce)
    await stream.write(framed(FRONT_PROOF.pack(front_nonce, mine)))
    (theirs,) = WRITER_PROOF.unpack(await _exact_frame(stream, WRITER_PROOF, "writer proof"))
    expected = _proof(secret, label=WRITER_LABEL, writer_nonce=writer_nonce,
                      front_nonce=front_nonce)
    if not hmac.compare_digest(expected, theirs):
        raise ForwardAuthError("the writer's proof does not match the forward secret")
