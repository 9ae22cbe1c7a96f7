"""The power-loss test's knobs, read from the environment, with the defaults CI runs.

    MQSTORE_POWERLOSS_CYCLES      power cuts per configuration             default 10
    MQSTORE_POWERLOSS_RUN_S_MIN   shortest time the writer runs per cycle  default 0.2
    MQSTORE_POWERLOSS_RUN_S_MAX   longest time the writer runs per cycle   default 2.0
    MQSTORE_POWERLOSS_PUT_RATE    messages per second the writer puts, at most; bounds what
                                  the verifier re-checks every cycle       default 4000
    MQSTORE_POWERLOSS_SEED        seed of the run times and the writer's choices; printed in
                                  the summary so that a run can be repeated  default: random
    MQSTORE_POWERLOSS_CLEAN_CLOSE_EVERY
                                  the verifier closes the store cleanly every Nth cycle (and
                                  the last); otherwise it exits with the store open, and the
                                  next writer recovers from a crash.  0: never  default 2
    MQSTORE_POWERLOSS_SCRUB_EVERY the verifier CRC-scrubs the recovered store (verify_store,
                                  as `mqstore verify`) every Nth cycle (`mqstore verify` scrubs
                                  the final state); seconds on FUSE as the store grows  default 3
    MQSTORE_POWERLOSS_EARLY_CUT_SHARE
                                  share of cycles whose power cut comes 0–0.4 s after the
                                  writer starts (often during its open and recovery) instead
                                  of 0.2–2 s after it opened                 default 0

With the defaults, all four configurations take about 2–3 minutes on 2 cores.
"""

from __future__ import annotations

import dataclasses
import os
import random


@dataclasses.dataclass(frozen=True)
class PowerLossSettings:
    cycle_count: int = 10
    run_time_s_min: float = 0.2
    run_time_s_max: float = 2.0
    put_rate_per_s: float = 4000.0
    seed: int = 0
    clean_close_every: int = 2
    scrub_every: int = 3
    early_cut_share: float = 0.0

    @classmethod
    def from_environment(cls) -> PowerLossSettings:
        environ = os.environ
        settings = cls(
            cycle_count=int(environ.get("MQSTORE_POWERLOSS_CYCLES", cls.cycle_count)),
            run_time_s_min=float(environ.get("MQSTORE_POWERLOSS_RUN_S_MIN", cls.run_time_s_min)),
            run_time_s_max=float(environ.get("MQSTORE_POWERLOSS_RUN_S_MAX", cls.run_time_s_max)),
            put_rate_per_s=float(environ.get("MQSTORE_POWERLOSS_PUT_RATE", cls.put_rate_per_s)),
            seed=int(environ.get("MQSTORE_POWERLOSS_SEED", random.randrange(1 << 31))),
            clean_close_every=int(environ.get("MQSTORE_POWERLOSS_CLEAN_CLOSE_EVERY",
                                              cls.clean_close_every)),
            scrub_every=int(environ.get("MQSTORE_POWERLOSS_SCRUB_EVERY", cls.scrub_every)),
            early_cut_share=float(environ.get("MQSTORE_POWERLOSS_EARLY_CUT_SHARE",
                                              cls.early_cut_share)))
        if settings.cycle_count < 1 or not 0 < settings.run_time_s_min <= settings.run_time_s_max \
                or settings.put_rate_per_s <= 0 or settings.clean_close_every < 0 \
                or settings.scrub_every < 1 \
                or not 0 <= settings.early_cut_share <= 1:
            raise ValueError(f"bad power-loss settings: {settings}")
        return settings

    def closes_cleanly_after(self, cycle: int) -> bool:
        """Whether the verifier of `cycle` closes the store (the last cycle's always does, so
        that `mqstore verify` sees a closed store)."""
        every = self.clean_close_every
        return cycle == self.cycle_count - 1 or (every > 0 and (cycle + 1) % every == 0)

    def scrubs_after(self, cycle: int) -> bool:
        """Not after the last cycle: `mqstore verify` scrubs the final state then."""
        return cycle < self.cycle_count - 1 and (cycle + 1) % self.scrub_every == 0

    @property
    def test_timeout_s(self) -> int:
        """pytest's bound for one configuration: a cycle takes ~5 s late in a run; 30 s is
        a hung cycle (the slowest verifier is bounded separately)."""
        return 120 + 30 * self.cycle_count
