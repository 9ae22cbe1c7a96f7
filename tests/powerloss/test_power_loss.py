"""Power loss on a file system that honestly drops unsynced writes (lossyfs), many times.

For each configuration (sync/async flush × transient store pool on/off), `cycles.py` runs
`MQSTORE_POWERLOSS_CYCLES` (default 10) power cuts on one backing directory while a writer
process puts, and after each the store must open and every acknowledged message of every
cycle so far must be readable by position, in its consume queue and by key.  Acknowledged
means synced: PUT_OK under sync flush; under async flush, a PUT_OK whose end a later
`flushed_position` covered.

The summary of each configuration is printed at the end of the session and written, with
every cycle's recovery reports and the durable state a failing cycle's recovery started from,
to `.cache/powerloss/<configuration>.json`.  Knobs: tests/powerloss/settings.py.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.powerloss.cycles import PowerLossRun
from tests.powerloss.mount import LossyMount
from tests.powerloss.settings import PowerLossSettings
from tests.powerloss.workload import VARIANTS, Variant
from tests.processes import REPO

pytestmark = pytest.mark.powerloss

SETTINGS = PowerLossSettings.from_environment()
REPORT_DIR = REPO / ".cache" / "powerloss"


@pytest.mark.timeout(SETTINGS.test_timeout_s)
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda variant: variant.name)
def test_no_acknowledged_message_is_lost_to_power_cuts(variant: Variant, lossyfs: LossyMount,
                                                       power_loss_summaries: list[str]) -> None:
    # Acks and child logs go beside the report (pytest's temporary directories rotate).
    work_dir = REPORT_DIR / variant.name
    shutil.rmtree(work_dir, ignore_errors=True)
    run = PowerLossRun(variant, lossyfs, work_dir, SETTINGS)
    summary = run.run()
    report_path = REPORT_DIR / f"{variant.name}.json"
    report_path.write_text(json.dumps(summary.as_json(), indent=1))
    text = summary.text() + f"\n   full report: {report_path}; acks and logs: {work_dir}"
    if summary.failed:  # the durable state, for the engine's debugging
        shutil.copytree(run.store_backing, work_dir / "final-state")
        text += f"\n   final durable state kept in {work_dir / 'final-state'}"
    print("\n" + text)
    power_loss_summaries.append(text)

    assert summary.cycles, "no cycle ran"
    assert summary.cycles[-1].acks_total > 0, "nothing was acknowledged: the test tested nothing"
    assert not summary.open_failures(), f"the store did not open:\n{text}"
    assert len(summary.cycles) == SETTINGS.cycle_count, text
    lost = {record.cycle: record.lost_count for record in summary.cycles if record.lost_count}
    assert not lost, f"acknowledged messages lost (cycle: count): {lost}\n{text}"
    failed = [record.cycle for record in summary.cycles if record.failed]
    assert not failed, (f"cycles failed (dispatch, scrub, recovery damage or synced bytes "
                        f"cut): {failed}\n{text}")
    assert summary.final_cli_verify.get("exit_code") == 0, f"mqstore verify failed:\n{text}"
