"""Prometheus plumbing shared by the services: a registry per app, gauges read at scrape time.

Counters and histograms are updated on the request path (once per request, never per
message).  Gauges that mirror the store (positions, lags, pool, segments, disk) and counters
the engine already keeps (syncs, preallocations, deletions) cost nothing between scrapes:
`CallbackMetrics` reads them when Prometheus asks.  Names follow Prometheus
conventions: `mqstore_` prefix, base units as suffixes (`_bytes`, `_seconds`, `_ratio`),
`_total` on counters.  The `_created` series prometheus_client would add to every counter and
histogram are turned off: Prometheus's text format ingests them as gauges of their own (twice
the series, named like neither), and nothing here reads them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

disable_created_metrics()  # type: ignore[no-untyped-call]

LabelValues = tuple[str, ...]
GaugeValue = float | None | Mapping[LabelValues, float]
"""A gauge read: a number, None (not applicable, e.g. no pool: the series is absent), or,
for a labelled gauge, one number per tuple of label values."""


@dataclasses.dataclass(frozen=True)
class GaugeSpec:
    name: str
    documentation: str
    read: Callable[[], GaugeValue]
    labels: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class CounterSpec(GaugeSpec):
    """A counter read at scrape time: `read` returns a running total kept elsewhere (by the
    engine), which only grows while the process lives.  The name ends in `_total`."""

    def __post_init__(self) -> None:
        assert self.name.endswith("_total"), f"counter {self.name} must end in _total"


def _family(spec: GaugeSpec) -> GaugeMetricFamily | CounterMetricFamily:
    kind = CounterMetricFamily if isinstance(spec, CounterSpec) else GaugeMetricFamily
    return kind(spec.name, spec.documentation, labels=spec.labels)


class CallbackMetrics(Collector):
    """A collector whose gauges and counters are computed by callbacks at scrape time."""

    def __init__(self, specs: Sequence[GaugeSpec]) -> None:
        names = [spec.name for spec in specs]
        assert len(set(names)) == len(names), f"duplicate metric names in {names}"
        self._specs = tuple(specs)

    def describe(self) -> Iterator[Metric]:
        for spec in self._specs:
            yield _family(spec)

    def collect(self) -> Iterator[Metric]:
        for spec in self._specs:
            value = spec.read()
            if value is None:
                continue
            family = _family(spec)
            if not spec.labels:
                assert not isinstance(value, Mapping)
                family.add_metric([], value)
            else:
                assert isinstance(value, Mapping)
                for label_values, number in value.items():
                    family.add_metric(list(label_values), number)
            yield family


def new_registry(specs: Sequence[GaugeSpec] = ()) -> CollectorRegistry:
    """A registry of its own (two apps in one test process must not share series)."""
    registry = CollectorRegistry()
    if specs:
        registry.register(CallbackMetrics(specs))
    return registry


def metrics_response(registry: CollectorRegistry) -> web.Response:
    """The text exposition of `registry`."""
    return web.Response(body=generate_latest(registry),
                        headers={"Content-Type": CONTENT_TYPE_LATEST})


Observe = Callable[[str, float, web.Request, web.StreamResponse], None]
"""(route name, seconds, request, response): count and time one answered request."""


def timing_middleware(endpoints: frozenset[str], observe: Observe) -> Any:
    """A middleware that times requests to the routes named in `endpoints` (others pass
    untouched) and hands each answer to `observe`.  Outermost: it sees the final status of
    errors the error middleware shapes."""
    clock = time.perf_counter

    @web.middleware
    async def timed(request: web.Request,
                    handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                    ) -> web.StreamResponse:
        name = request.match_info.route.name
        if name not in endpoints:
            return await handler(request)
        started = clock()
        response = await handler(request)
        observe(name, clock() - started, request, response)
        return response

    return timed
