"""Draw a dashboard of the chart from real Prometheus data (docs/images/overview-dashboard.png).

    # against a Prometheus that scrapes mqstore (labels namespace, broker, pod, container):
    .venv/bin/python scripts/render_dashboard.py --prometheus http://127.0.0.1:9090 \\
        --namespace prod --broker orders --minutes 30

    # standalone (root: the pods' volumes are tmpfs mounts): start the healthy broker of the
    # observability test (a sync master with pool + indexer + notifier, its follower, a
    # produce/consume workload) and Debian's Prometheus scraping it, run, draw, stop:
    .venv/bin/python scripts/render_dashboard.py --standalone --seconds 300

Grafana is not needed (nor available here): e2e/dashboard_picture.py runs each panel's
queries as range queries and draws them with matplotlib in the panels' grid positions.
Exits non-zero if a panel got no data, after writing the picture (so it can be looked at).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# After the standard library (the repository's operator/ folder must not shadow `operator`).
sys.path.append(str(ROOT))

from e2e.dashboard_picture import render  # noqa: E402 (needs the path above)
from e2e.obs_queries import DASHBOARDS  # noqa: E402
from e2e.obs_scenarios import HEALTHY, Brokers, start_healthy  # noqa: E402
from e2e.obs_stack import NAMESPACE  # noqa: E402
from e2e.prometheus import Prometheus, PrometheusApi  # noqa: E402

DEFAULT_OUT = ROOT / "docs" / "images" / "overview-dashboard.png"


def standalone(dashboard: Path, out: Path, seconds: float) -> dict[str, int]:
    with tempfile.TemporaryDirectory(prefix="mqstore-render-") as directory:
        brokers = Brokers(Path(directory))
        prometheus: Prometheus | None = None
        try:
            start_healthy(brokers)
            (Path(directory) / "prometheus").mkdir()
            prometheus = Prometheus(Path(directory) / "prometheus", targets=brokers.targets())
            prometheus.start()
            prometheus.wait_targets_up()
            started_s = time.time()
            print(f"render: workload and scrapes running for {seconds:.0f} s", file=sys.stderr)
            time.sleep(seconds)
            return render(prometheus, dashboard, out, namespace=NAMESPACE, broker=HEALTHY,
                          start_s=started_s)
        finally:
            if prometheus is not None:
                prometheus.stop()
            brokers.teardown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prometheus", help="URL of a Prometheus scraping mqstore")
    source.add_argument("--standalone", action="store_true",
                        help="run the services, a workload and Prometheus here first")
    parser.add_argument("--seconds", type=float, default=300.0,
                        help="standalone: how long the workload runs (default 300)")
    parser.add_argument("--namespace", default=NAMESPACE)
    parser.add_argument("--broker", default=HEALTHY)
    parser.add_argument("--minutes", type=float, default=30.0,
                        help="--prometheus: the time range drawn, ending now (default 30)")
    parser.add_argument("--dashboard", type=Path, default=DASHBOARDS / "mqstore-overview.json")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if args.standalone:
        got = standalone(args.dashboard, args.out, args.seconds)
    else:
        step_s = max(1.0, args.minutes * 60 / 600)  # ≤ 600 points a series
        got = render(PrometheusApi(args.prometheus), args.dashboard, args.out,
                     namespace=args.namespace, broker=args.broker,
                     start_s=time.time() - args.minutes * 60, step_s=step_s)
    empty = sorted(title for title, count in got.items() if count == 0)
    size_kib = args.out.stat().st_size / 1024
    print(f"render: {args.out} ({size_kib:.0f} KiB), {len(got)} panels"
          + (f", NO DATA in: {', '.join(empty)}" if empty else ", each with data"))
    return 1 if empty else 0


if __name__ == "__main__":
    sys.exit(main())
