"""Running a service's main coroutine on the configured event loop (`event_loop` setting)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")


def run_service(main: Coroutine[Any, Any, T], *, event_loop: str) -> T:
    """`asyncio.run(main)` on uvloop or on the standard loop."""
    if event_loop == "uvloop":
        return uvloop.run(main)
    assert event_loop == "asyncio", event_loop
    return asyncio.run(main)
