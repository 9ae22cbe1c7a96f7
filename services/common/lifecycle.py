"""Process lifecycle shared by the services: wait for the first SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import signal


async def first_signal() -> int:
    """Return the number of the first SIGTERM/SIGINT.  The handlers stay until the loop
    closes: a second signal during the drain is ignored rather than interrupting the close."""
    loop = asyncio.get_running_loop()
    received: asyncio.Future[int] = loop.create_future()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _settle, received, signum)
    return await received


def _settle(received: asyncio.Future[int], signum: int) -> None:
    if not received.done():
        received.set_result(signum)
