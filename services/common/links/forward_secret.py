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

The handshake is services/common/links/mutual_proof.py's (magic b"MQFH", the writer listening,
the front dialing), each message sent as one frame of services/common/links/framing.py, before
any request.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from mqstore.services.common.links.framing import FramedStream, TransportError, framed
from mqstore.services.common.links.mutual_proof import (
    DIALER_PROOF,
    HELLO,
    LISTENER_PROOF,
    MutualProof,
    ProofError,
)

SECRET_FILE_NAME = "forward-secret"
SECRET_SIZE_BYTES = 32
"""256 random bits, written as 64 hex digits: beyond guessing, offline or online."""
FORWARD = MutualProof(magic=b"MQFH", listener="writer", dialer="front",
                      port_hint="is writer_address the writer's forward port?")


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


async def _exact_frame(stream: FramedStream, size_bytes: int, what: str) -> bytes:
    frame = await stream.read_frame(frame_size_bytes_max=size_bytes)
    if frame is None or len(frame) != size_bytes:
        raise ForwardAuthError(f"expected the {size_bytes}-byte {what}, got "
                               f"{'nothing' if frame is None else f'{len(frame)} bytes'}")
    return frame


async def check_front(stream: FramedStream, secret: bytes) -> None:
    """The writer's side: ForwardAuthError (close the connection) unless the peer proves."""
    hello, writer_nonce = FORWARD.hello()
    await stream.write(framed(hello))
    answer = await _exact_frame(stream, DIALER_PROOF.size, "front proof")
    try:
        mine = FORWARD.listener_proof(secret, writer_nonce, answer)
    except ProofError as error:
        raise ForwardAuthError(str(error)) from None
    await stream.write(framed(mine))


async def prove_front(stream: FramedStream, secret: bytes) -> None:
    """The front's side: ForwardAuthError unless the listener is the writer of `secret`."""
    try:
        hello = await _exact_frame(stream, HELLO.size, "hello")
        answer, writer_nonce, front_nonce = FORWARD.dialer_proof(secret, hello)
        await stream.write(framed(answer))
        FORWARD.check_listener(secret, writer_nonce, front_nonce,
                               await _exact_frame(stream, LISTENER_PROOF.size, "writer proof"))
    except ProofError as error:
        raise ForwardAuthError(str(error)) from None
