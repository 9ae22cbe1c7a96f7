"""Retry delays: exponential backoff with full jitter, never shorter than Retry-After.

Attempt n (0-based) waits a uniform random time in [0, min(backoff_max, initial * 2^n)]:
jitter keeps producers that failed together from retrying together.  A server's Retry-After
is a floor: the server knows when it expects to have room, so it wins over a shorter draw
(and over `backoff_max_ms`).
"""

from __future__ import annotations

import random


class Backoff:
    def __init__(self, *, retries_max: int, initial_ms: int, max_ms: int,
                 rng: random.Random | None = None) -> None:
        if retries_max < 0:
            raise ValueError(f"retries_max={retries_max} must be >= 0")
        if not 0 < initial_ms <= max_ms:
            raise ValueError(f"need 0 < backoff_initial_ms={initial_ms} <= "
                             f"backoff_max_ms={max_ms}")
        self.retries_max = retries_max
        self._initial_s = initial_ms / 1000
        self._max_s = max_ms / 1000
        self._rng = rng or random.Random()

    def delay_s(self, attempt: int, *, retry_after_s: float | None = None) -> float:
        assert attempt >= 0
        ceiling = min(self._max_s, self._initial_s * (1 << min(attempt, 30)))
        drawn = self._rng.uniform(0, ceiling)
        return max(drawn, retry_after_s) if retry_after_s is not None else drawn
