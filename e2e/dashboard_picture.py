"""A picture of a Grafana dashboard drawn from real Prometheus data (no Grafana here): each
panel's queries run as range queries, each series drawn with its legend, in the panels'
own grid positions, titles and units.  scripts/render_dashboard.py is the command line.

What differs from Grafana: matplotlib's look, not Grafana's; a stat panel shows each
series' last value; thresholds, colours and overrides of the JSON are not drawn."""

from __future__ import annotations

import datetime
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter

from .obs_queries import load_dashboard, substitute
from .prometheus import PrometheusApi

GRID_COLUMNS = 24
"""Grafana's grid is 24 units wide; a panel's gridPos says where it sits."""
INCH_PER_ROW_UNIT = 0.2
ROW_HEIGHT_UNITS = 3
GAP_UNITS = 2
FIGURE_WIDTH_IN = 16.0
DPI = 72
LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")
BINARY_PREFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi")


@dataclass(frozen=True)
class Series:
    label: str
    times_s: list[float]
    values: list[float]


def legend(template: str, labels: dict[str, str]) -> str:
    return LEGEND.sub(lambda found: labels.get(found[1], ""), template) or str(labels)


def range_series(api: PrometheusApi, expr: str, template: str, *, start_s: float,
                 end_s: float, step_s: float) -> list[Series]:
    found = []
    for result in api.query_range(expr, start_s=start_s, end_s=end_s, step_s=step_s):
        points = [(float(t), float(v)) for t, v in result["values"]]
        points = [(t, v) for t, v in points if math.isfinite(v)]
        if points:
            found.append(Series(legend(template, result["metric"]),
                                [t for t, _ in points], [v for _, v in points]))
    return found


def format_value(value: float, unit: str) -> str:
    """A tick label in the panel's Grafana unit."""
    if unit in ("bytes", "Bps"):
        scaled, prefix = abs(value), 0
        while scaled >= 1024 and prefix < len(BINARY_PREFIXES) - 1:
            scaled, prefix = scaled / 1024, prefix + 1
        sign = "-" if value < 0 else ""
        text = f"{sign}{scaled:.3g} {BINARY_PREFIXES[prefix]}B"
        return text + "/s" if unit == "Bps" else text
    if unit == "s":
        for factor, suffix in ((86400.0, "d"), (3600.0, "h"), (60.0, "min"), (1.0, "s"),
                               (1e-3, "ms"), (1e-6, "µs")):
            if abs(value) >= factor or factor == 1e-6:
                return f"{value / factor:.3g} {suffix}"
    if unit == "percentunit":
        return f"{100 * value:.3g}%"
    suffix = {"ops": "/s", "reqps": " req/s"}.get(unit, "")
    return f"{value:.3g}{suffix}"


def draw_timeseries(axes: Axes, series: list[Series], unit: str) -> None:
    for one in series:
        times = [datetime.datetime.fromtimestamp(t, tz=datetime.UTC) for t in one.times_s]
        axes.plot(mdates.date2num(times), one.values, label=one.label, linewidth=1.2)
    axes.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=datetime.UTC))
    axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_value(v, unit)))
    axes.tick_params(labelsize=7)
    axes.grid(alpha=0.3)
    if series:
        axes.legend(fontsize=7, loc="upper left", framealpha=0.6)


def draw_stat(axes: Axes, series: list[Series], unit: str) -> None:
    axes.set_axis_off()
    lines = [f"{one.label}: {format_value(one.values[-1], unit)}" for one in series]
    axes.text(0.5, 0.5, "\n".join(lines) or "no data", ha="center", va="center",
              fontsize=18, transform=axes.transAxes)


def panel_series(api: PrometheusApi, panel: dict[str, Any], *, namespace: str, broker: str,
                 start_s: float, end_s: float, step_s: float) -> list[Series]:
    series = []
    for target in panel.get("targets", []):
        expr = substitute(target["expr"], namespace=namespace, broker=broker)
        series += range_series(api, expr, target.get("legendFormat", ""), start_s=start_s,
                               end_s=end_s, step_s=step_s)
    return series


def place(panels: list[dict[str, Any]]) -> list[tuple[dict[str, Any], tuple[int, int]]]:
    """Each panel with its (y, height) in picture grid units: Grafana's, except that a row
    header gets ROW_HEIGHT_UNITS (1 in Grafana: too little for its title above a panel's)
    and a line of panels below another gets GAP_UNITS more (room for its titles above the
    time labels of the line above)."""
    placed = []
    extra = 0
    line_y, after_row = -1, True
    for panel in sorted(panels, key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"])):
        y, h = panel["gridPos"]["y"], panel["gridPos"]["h"]
        if y != line_y and not after_row and panel["type"] != "row":
            extra += GAP_UNITS
        line_y, after_row = y, panel["type"] == "row"
        if after_row:
            placed.append((panel, (y + extra, ROW_HEIGHT_UNITS)))
            extra += ROW_HEIGHT_UNITS - h
        else:
            placed.append((panel, (y + extra, h)))
    return placed


def render(api: PrometheusApi, dashboard_path: Path, out_path: Path, *, namespace: str,
           broker: str, start_s: float, end_s: float | None = None,
           step_s: float = 1.0) -> dict[str, int]:
    """Draw the dashboard to `out_path` (PNG); returns each panel's title and how many
    series with data it got (0: the panel would be empty in Grafana too)."""
    end_s = end_s or time.time()
    dashboard = load_dashboard(dashboard_path)
    placed = place(dashboard["panels"])
    height_units = max(y + h for _, (y, h) in placed)
    height_in = height_units * INCH_PER_ROW_UNIT + 1.0
    figure = plt.figure(figsize=(FIGURE_WIDTH_IN, height_in))
    grid = figure.add_gridspec(height_units, GRID_COLUMNS, hspace=0.3, wspace=1.2,
                               top=1 - 0.8 / height_in, bottom=0.2 / height_in)
    got: dict[str, int] = {}
    for panel, (y, h) in placed:
        x, w = panel["gridPos"]["x"], panel["gridPos"]["w"]
        axes = figure.add_subplot(grid[y:y + h, x:x + w])
        if panel["type"] == "row":
            axes.set_axis_off()
            axes.text(0, 0.5, panel["title"], fontsize=13, weight="bold",
                      transform=axes.transAxes)
            continue
        series = panel_series(api, panel, namespace=namespace, broker=broker,
                              start_s=start_s, end_s=end_s, step_s=step_s)
        got[panel["title"]] = len(series)
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        (draw_stat if panel["type"] == "stat" else draw_timeseries)(axes, series, unit)
        axes.set_title(panel["title"], fontsize=10, loc="left")
    span_s = end_s - start_s
    span = f"{span_s / 60:.0f} min" if span_s >= 120 else f"{span_s:.0f} s"
    figure.suptitle(f"{dashboard['title']} — namespace {namespace}, broker {broker}, "
                    f"{span} of real Prometheus data "
                    f"(scripts/render_dashboard.py)", fontsize=13)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out_path, dpi=DPI)
    plt.close(figure)
    return got
