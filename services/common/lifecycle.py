"""Process lifecycle shared by the services: wait for the first SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable


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


async def stop_reason(failure: Callable[[], str | None], *, poll_interval_s: float = 0.2) -> str:
    """Wait for SIGTERM/SIGINT or for `failure()` to name one; return which.  A service whose
    engine stopped itself exits (and is restarted by its supervisor) instead of idling
    unready: every service recovers from its files on start."""
    signalled = asyncio.ensure_future(first_signal())
    try:
        while not signalled.done():
            reason = failure()
            if reason is not None:
                return f"failure: {reason}"
            await asyncio.wait([signalled], timeout=poll_interval_s)
        return signal.Signals(signalled.result()).name
    finally:
        signalled.cancel()
