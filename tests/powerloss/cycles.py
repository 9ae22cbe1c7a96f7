"""The power-loss cycles of one store configuration, on one backing directory.

Each cycle, on the same backing directory (damage accumulates, as on a real machine's disk):

1. mount lossyfs; start the writer (writer.py), which opens the store (recovering from the
   last power cut) and puts, recording every acknowledged message outside the mount;
2. after a random 0.2–2 s (settings), cut the power, then kill -9 the writer;
3. mount again; the verifier (verifier.py) opens the store and checks every ack of every
   cycle so far by position, consume queue and key, and every third cycle scrubs the
   recovered store as `mqstore verify` does (settings.scrub_every).  Every other
   cycle (settings.clean_close_every) and on the last it closes the store cleanly; otherwise
   it exits with the store open, so the next writer recovers from a clean shutdown one cycle
   and from a crash the next;
4. cut the power again.

After the last cycle, `mqstore verify` (the CLI) runs on the final state.  A cycle whose
store does not open ends the run: nothing later could open it either.
"""

from __future__ import annotations

import json
import random
import select
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

from tests.powerloss.mount import LossyMount
from tests.powerloss.report import CycleRecord, VariantSummary, durable_manifest
from tests.powerloss.settings import PowerLossSettings
from tests.powerloss.workload import Variant, read_acks
from tests.processes import MQSTORE, REPO, module_command

WRITER_OPEN_TIMEOUT_S = 60.0
"""From starting the writer to its "opened" line (recovery of a 1 MiB-segment store)."""
VERIFIER_TIMEOUT_S = 180.0
CLI_VERIFY_TIMEOUT_S = 120.0
EARLY_CUT_S_MAX = 0.4
"""An early cut comes 0–0.4 s after the writer starts: its open (imports, recovery) takes
about 0.2–0.4 s here."""


def last_positions(path: Path) -> dict[str, int]:
    """The writer's last complete "written flushed" line before the cut (empty if none)."""
    lines = [line for line in path.read_text().splitlines(keepends=True)
             if line.endswith("\n")] if path.exists() else []
    if not lines:
        return {}
    written, flushed = lines[-1].split()
    return {"written": int(written), "flushed": int(flushed)}


class PowerLossRun:
    def __init__(self, variant: Variant, mount: LossyMount, work_dir: Path,
                 settings: PowerLossSettings) -> None:
        self.variant = variant
        self.mount = mount
        self.settings = settings
        self.store_dir = mount.mount_point / "store"
        self.store_backing = mount.backing / "store"
        self.acks_dir = work_dir / "acks"
        self.logs_dir = work_dir / "logs"
        seed = settings.seed ^ zlib.crc32(variant.name.encode())
        self.rng = random.Random(seed)
        self.summary = VariantSummary(variant.name, settings.cycle_count, settings.seed)

    def run(self) -> VariantSummary:
        started = time.monotonic()
        # The store's own directory exists, durably, before the first boot (as a broker's
        # configured store path would): the engine is tested from there on.
        self.store_backing.mkdir(parents=True)
        self.acks_dir.mkdir(parents=True)
        self.logs_dir.mkdir(parents=True)
        for cycle in range(self.settings.cycle_count):
            record = self.run_cycle(cycle)
            self.summary.cycles.append(record)
            if not record.opened:
                break
        self.summary.final_cli_verify = self.cli_verify()
        self.summary.wall_time_s = time.monotonic() - started
        return self.summary

    def run_cycle(self, cycle: int) -> CycleRecord:
        run_time_s = self.rng.uniform(self.settings.run_time_s_min, self.settings.run_time_s_max)
        ack_path = self.acks_dir / f"acks-{cycle:04d}.txt"
        ack_path.touch()
        positions_path = self.logs_dir / f"positions-{cycle:04d}.txt"
        self.mount.start()
        writer_recovery, writer_error, early_cut = self.run_writer(cycle, ack_path,
                                                                   positions_path, run_time_s)
        acks_new = len(read_acks([ack_path]))
        state = durable_manifest(self.store_backing)
        self.mount.start()
        verifier = self.run_verifier(cycle, close=self.settings.closes_cleanly_after(cycle),
                                     scrub=self.settings.scrubs_after(cycle))
        self.mount.cut_power()
        record = CycleRecord(cycle=cycle, run_time_s=round(run_time_s, 3), early_cut=early_cut,
                             writer_recovery=writer_recovery, writer_error=writer_error,
                             acks_new=acks_new, positions_at_cut=last_positions(positions_path),
                             acks_total=len(read_acks(self.acks_dir.glob("acks-*.txt"))),
                             verifier=verifier)
        if record.failed:
            record.state_before_verify = state
        return record

    def run_writer(self, cycle: int, ack_path: Path, positions_path: Path,
                   run_time_s: float) -> tuple[dict[str, Any] | None, str, bool]:
        """Start the writer, let it put for run_time_s after its open, cut the power, kill -9.
        Returns its recovery report (None if it did not open), why not, and whether the power
        was cut early on purpose (settings.early_cut_share: 0–EARLY_CUT_S_MAX after its start,
        usually during its open and recovery)."""
        early_cut = self.rng.random() < self.settings.early_cut_share
        log_path = self.logs_dir / f"writer-{cycle:04d}.log"
        with open(log_path, "w") as log:
            writer = subprocess.Popen(
                [*module_command("tests.powerloss.writer"), self.variant.name,
                 str(self.store_dir), str(ack_path), str(positions_path), str(cycle),
                 str(self.rng.randrange(1 << 30)), str(self.settings.put_rate_per_s)],
                cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True)
        assert writer.stdout is not None
        try:
            if early_cut:
                time.sleep(self.rng.uniform(0, EARLY_CUT_S_MAX))
            else:
                readable, _, _ = select.select([writer.stdout], [], [], WRITER_OPEN_TIMEOUT_S)
                if readable and writer.poll() is None:  # "opened" (or exited: no wait)
                    time.sleep(run_time_s)
        finally:
            try:
                self.mount.cut_power()
            finally:
                writer.kill()
                said, _ = writer.communicate()
        if said.startswith("opened "):
            return json.loads(said.splitlines()[0].removeprefix("opened ")), "", early_cut
        if early_cut:
            return None, "", True
        return None, f"said {said!r}; log: {log_path.read_text()[-3000:]}", False

    def run_verifier(self, cycle: int, *, close: bool, scrub: bool) -> dict[str, Any]:
        log_path = self.logs_dir / f"verifier-{cycle:04d}.log"
        started = time.monotonic()
        with open(log_path, "w") as log:
            try:
                done = subprocess.run(
                    [*module_command("tests.powerloss.verifier"), self.variant.name,
                     str(self.store_dir), str(self.acks_dir), "1" if close else "0",
                     "1" if scrub else "0"],
                    cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True,
                    timeout=VERIFIER_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired:
                return {"opened": False, "open_error": f"verifier hung for {VERIFIER_TIMEOUT_S} s"}
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            return {"opened": False, "open_error": f"verifier exited {done.returncode}: "
                                                   f"{log_path.read_text()[-3000:]}"}
        verifier: dict[str, Any] = json.loads(lines[-1])
        verifier["closed_cleanly"] = close
        verifier["wall_s"] = round(time.monotonic() - started, 3)
        return verifier

    def cli_verify(self) -> dict[str, Any]:
        """`mqstore verify` on the final state (read-only, after the last verifier closed)."""
        self.mount.start()
        try:
            done = subprocess.run([*MQSTORE, "verify", str(self.store_dir)], cwd=REPO,
                                  capture_output=True, text=True, timeout=CLI_VERIFY_TIMEOUT_S,
                                  check=False)
        finally:
            self.mount.cut_power()
        said = (done.stdout.strip() or done.stderr.strip()).splitlines()
        return {"exit_code": done.returncode, "summary": said[-1] if said else "",
                "output_tail": "\n".join(said[-10:])}
