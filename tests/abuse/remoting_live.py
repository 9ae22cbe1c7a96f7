"""A remoting front served on 127.0.0.1 inside the test's event loop, for the abuse tests.

Sends go to a stand-in writer listener of the test's own that closes every connection, so
a send answers SYSTEM_ERROR at once and never reaches another process on this machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting.service import RemotingFront
from mqstore.storage import StoreConfig
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView

FRAME_LENGTH_BYTES = 4


@contextlib.asynccontextmanager
async def closing_writer() -> AsyncIterator[str]:
    """A listener that closes each connection at once: the writer, unreachable."""

    async def close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(close, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


@contextlib.asynccontextmanager
async def serving(directory: Path, settings: RemotingSettings) -> AsyncIterator[RemotingFront]:
    """`RemotingFront` listening on 127.0.0.1 (port 0), its writer a `closing_writer`."""
    view = StoreView.open(directory, StoreConfig(store_host="127.0.0.1:9876"))
    try:
        async with closing_writer() as writer_address:
            settings = dataclasses.replace(settings, host="127.0.0.1", port=0,
                                           writer_address=writer_address)
            front = RemotingFront(view, ConsumerOffsets(directory, lock_timeout_ms=1000),
                                  settings, queue_count_max=8)
            await front.start()
            try:
                yield front
            finally:
                await front.close()
    finally:
        view.close()


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """One frame without its length word."""
    length = int.from_bytes(await reader.readexactly(FRAME_LENGTH_BYTES), "big")
    return await reader.readexactly(length)


def tracebacks_and_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every record at ERROR or above, and every record with a traceback, as text."""
    return [f"{record.levelname} {record.name}: {record.getMessage()}"
            for record in caplog.records
            if record.levelno >= logging.ERROR or record.exc_info is not None]
