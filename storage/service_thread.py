"""The base of every background service: one thread, a wakeup, a stop, and a fatal path.

RocketMQ `ServiceThread`: `wakeup()` makes the next (or current) `wait_for_running` return at
once; otherwise it returns after the interval.  An exception escaping `run_once` is fatal: it
is handed to `on_fatal` (the store stops accepting writes) and the thread ends.  It is never
only logged (RocketMQ's flush loops catch Throwable and carry on).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

FatalHandler = Callable[[str, BaseException], None]


class ServiceThread:
    """Subclasses implement `run_once()` and `shutdown_drain()`."""

    name = "service"

    def __init__(self, *, on_fatal: FatalHandler) -> None:
        self._on_fatal = on_fatal
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def start(self) -> None:
        assert self._thread is None, "started twice"
        self._thread = threading.Thread(target=self._run, name=f"mqstore-{self.name}",
                                        daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        if not self._wake.is_set():
            self._wake.set()

    @property
    def wakeup_pending(self) -> Callable[[], bool]:
        """Whether a wakeup is set and not yet consumed by the thread's wait (a bound
        method: the put path calls it on every append)."""
        return self._wake.is_set

    def wait_for_running(self, interval_ms: int) -> None:
        self._wake.wait(interval_ms / 1000)
        # Clear before the caller looks at its inputs: a wakeup that arrives after this
        # line finds the event clear, sets it, and the next wait returns at once.
        self._wake.clear()

    def stop(self, *, timeout_s: float = 30.0) -> None:
        """Ask the thread to finish; `shutdown_drain` runs on it before it ends."""
        self._stopping.set()
        self.wakeup()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
            assert not self._thread.is_alive(), f"{self.name} did not stop in {timeout_s} s"

    def run_once(self) -> None:
        raise NotImplementedError

    def shutdown_drain(self) -> None:
        """Last work on stop (final commit or flush); the default does nothing."""

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                self.run_once()
            self.shutdown_drain()
        except BaseException as error:
            log.critical("%s failed; the store stops accepting writes", self.name,
                         exc_info=error)
            self._on_fatal(self.name, error)
