"""What the power-loss test records: per cycle, per configuration, and as text.

`CycleRecord` is one cycle (the writer's open, its acks, the verifier's JSON, and the
durable state the verifier started from when the cycle failed); `VariantSummary` collects a
configuration's cycles and says what to assert.  `durable_manifest` lists the backing
directory (every file and its size, the checkpoint's fields): the state a failing recovery saw.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import struct
from pathlib import Path
from typing import Any

from mqstore.storage import RecoveryReport


def recovery_fields(report: RecoveryReport) -> dict[str, Any]:
    fields = dataclasses.asdict(report)
    fields["mode"] = report.mode.value
    return fields


def durable_manifest(store_dir: Path) -> dict[str, Any]:
    """Every file below `store_dir` with its size, and the checkpoint's five fields."""
    files = {str(path.relative_to(store_dir)): path.stat().st_size
             for path in sorted(store_dir.rglob("*")) if path.is_file()}
    manifest: dict[str, Any] = {"files": files}
    checkpoint = store_dir / "checkpoint"
    if checkpoint.is_file() and checkpoint.stat().st_size >= 40:
        names = ("physic_msg_timestamp_ms", "logics_msg_timestamp_ms", "index_msg_timestamp_ms",
                 "master_flushed_offset", "confirm_physical_offset")
        values = struct.unpack(">qqqqq", checkpoint.read_bytes()[:40])
        manifest["checkpoint"] = dict(zip(names, values, strict=True))
    return manifest


@dataclasses.dataclass
class CycleRecord:
    cycle: int
    run_time_s: float
    early_cut: bool
    """The power was cut 0–0.4 s after the writer started, maybe before it opened."""
    writer_recovery: dict[str, Any] | None
    """The writer's open (None: it did not open; writer_error says why)."""
    writer_error: str
    acks_new: int
    positions_at_cut: dict[str, int]
    """The writer's last reported written and flushed positions before the cut."""
    acks_total: int
    verifier: dict[str, Any]
    state_before_verify: dict[str, Any] | None = None
    """The backing directory the verifier's recovery started from (kept for failed cycles)."""

    @property
    def writer_opened(self) -> bool:
        """The writer opened the store, or the power was cut before it could (early_cut)."""
        return self.writer_recovery is not None or (self.early_cut and not self.writer_error)

    @property
    def opened(self) -> bool:
        return self.writer_opened and bool(self.verifier.get("opened"))

    @property
    def lost_count(self) -> int:
        return int(self.verifier.get("lost_count", 0))

    @property
    def recovered_end(self) -> int | None:
        recovery = self.verifier.get("recovery")
        return int(recovery["end_position"]) if recovery is not None else None

    @property
    def synced_bytes_lost(self) -> int:
        """Bytes the writer reported flushed that recovery did not find (must be 0)."""
        flushed, end = self.positions_at_cut.get("flushed"), self.recovered_end
        return max(0, flushed - end) if flushed is not None and end is not None else 0

    @property
    def damage(self) -> list[str]:
        """Damage either recovery reported.  lossyfs never tears a write or syncs out of
        order, so any damage is a durable state the engine itself made inconsistent."""
        found = []
        for who, recovery in (("writer", self.writer_recovery),
                              ("verifier", self.verifier.get("recovery"))):
            for damage in (recovery or {}).get("damage", []):
                found.append(f"{who}: [{damage['position']}, {damage['end_position']}): "
                             f"{damage['reason']}")
        return found

    @property
    def failed(self) -> bool:
        return (not self.opened or self.lost_count > 0 or not self.verifier.get("dispatched")
                or bool(self.verifier.get("scrub_corruptions")) or self.synced_bytes_lost > 0
                or bool(self.damage))


@dataclasses.dataclass
class VariantSummary:
    variant: str
    cycle_count_target: int
    seed: int
    cycles: list[CycleRecord] = dataclasses.field(default_factory=list)
    final_cli_verify: dict[str, Any] = dataclasses.field(default_factory=dict)
    wall_time_s: float = 0.0

    def recovery_modes(self) -> dict[str, int]:
        modes: collections.Counter[str] = collections.Counter()
        for record in self.cycles:
            if record.writer_recovery is not None:
                modes["writer:" + record.writer_recovery["mode"]] += 1
            if "recovery" in record.verifier:
                modes["verifier:" + record.verifier["recovery"]["mode"]] += 1
        return dict(sorted(modes.items()))

    def truncated_bytes(self) -> list[int]:
        truncated = []
        for record in self.cycles:
            for recovery in (record.writer_recovery, record.verifier.get("recovery")):
                if recovery is not None:
                    truncated.append(int(recovery["truncated_bytes"]))
        return truncated

    def open_failures(self) -> list[str]:
        failures = []
        for record in self.cycles:
            if not record.writer_opened:
                failures.append(f"cycle {record.cycle} writer: {record.writer_error}")
            if not record.verifier.get("opened"):
                failures.append(f"cycle {record.cycle} verifier: "
                                f"{record.verifier.get('open_error', record.verifier)}")
        return failures

    @property
    def failed(self) -> bool:
        return (not self.cycles or bool(self.open_failures())
                or len(self.cycles) < self.cycle_count_target
                or any(record.failed for record in self.cycles)
                or self.final_cli_verify.get("exit_code") != 0)

    def as_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "cycle_count_target": self.cycle_count_target,
                "seed": self.seed, "wall_time_s": round(self.wall_time_s, 1),
                "recovery_modes": self.recovery_modes(),
                "truncated_bytes": self.truncated_bytes(),
                "open_failures": self.open_failures(),
                "final_cli_verify": self.final_cli_verify,
                "cycles": [dataclasses.asdict(record) for record in self.cycles]}

    def text(self) -> str:
        acks_checked = sum(int(r.verifier.get("acks_checked", 0)) for r in self.cycles)
        acks_total = self.cycles[-1].acks_total if self.cycles else 0
        lines = [f"== {self.variant}: {len(self.cycles)}/{self.cycle_count_target} cycles in "
                 f"{self.wall_time_s:.1f} s (seed {self.seed}); {acks_total} messages "
                 f"acknowledged, {acks_checked} ack checks over all cycles",
                 f"   recovery modes: {self.recovery_modes()}",
                 f"   truncated bytes (writer, verifier per cycle): {self.truncated_bytes()}",
                 f"   mqstore verify at the end (exit {self.final_cli_verify.get('exit_code')}): "
                 f"{self.final_cli_verify.get('summary', '-')}"]
        for record in self.cycles:
            verifier = record.verifier
            status = "FAILED" if record.failed else "ok"
            positions = record.positions_at_cut
            run = "cut early" if record.early_cut else f"run {record.run_time_s:4.2f} s"
            lines.append(f"   cycle {record.cycle:2d} {status:6s} {run}, "
                         f"+{record.acks_new} acks, lost {record.lost_count}/"
                         f"{verifier.get('acks_checked', 0)}; at the cut written "
                         f"{positions.get('written', '?')}, flushed "
                         f"{positions.get('flushed', '?')}; recovered end {record.recovered_end} "
                         f"({verifier.get('recovery', {}).get('mode', 'did not open')}), "
                         f"damage {len(record.damage)}, scrub "
                         + (f"{len(verifier.get('scrub_corruptions', []))} corrupt"
                            if verifier.get("scrubbed") else "skipped"))
            if record.failed:
                lines.extend(f"      {line}" for line in _failure_lines(record))
        return "\n".join(lines)


def _failure_lines(record: CycleRecord) -> list[str]:
    verifier = record.verifier
    lines = []
    if not record.writer_opened:
        lines.append(f"writer did not open: {record.writer_error}")
    if not verifier.get("opened"):
        lines.append(f"verifier did not open: {verifier.get('open_error')}")
    else:
        lines.append(f"recovery: {json.dumps(verifier['recovery'])}")
    lines.extend(f"lost {sample['ack']}: {sample['reason']}"
                 for sample in verifier.get("lost_samples", [])[:5])
    lines.extend(f"scrub: {corruption}" for corruption in verifier.get("scrub_corruptions", [])[:5])
    lines.extend(f"recovery reported damage, {damage}" for damage in record.damage[:5])
    if not verifier.get("dispatched", True):
        lines.append("dispatch did not catch up")
    if record.synced_bytes_lost:
        lines.append(f"recovery ended the log {record.synced_bytes_lost} bytes before the "
                     f"flushed position the writer saw: synced bytes lost")
    return lines
