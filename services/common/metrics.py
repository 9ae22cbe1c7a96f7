"""Prometheus plumbing shared by the services: a registry per app, gauges read at scrape time.

Counters and histograms are updated on the request path (once per request, never per
message).  Gauges that mirror the store (positions, lags, pool, segments, disk) cost nothing
between scrapes: `CallbackGauges` reads them when Prometheus asks.  Names follow Prometheus
conventions: `mqstore_` prefix, base units as suffixes (`_bytes`, `_seconds`, `_ratio`),
`_total` on counters.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

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


class CallbackGauges(Collector):
    """A collector whose gauges are computed by callbacks at scrape time."""

    def __init__(self, specs: Sequence[GaugeSpec]) -> None:
        names = [spec.name for spec in specs]
        assert len(set(names)) == len(names), f"duplicate gauge names in {names}"
        self._specs = tuple(specs)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        for spec in self._specs:
            yield GaugeMetricFamily(spec.name, spec.documentation, labels=spec.labels or None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for spec in self._specs:
            value = spec.read()
            if value is None:
                continue
            if not spec.labels:
                assert not isinstance(value, Mapping)
                yield GaugeMetricFamily(spec.name, spec.documentation, value=value)
                continue
            assert isinstance(value, Mapping)
            family = GaugeMetricFamily(spec.name, spec.documentation, labels=spec.labels)
            for label_values, number in value.items():
                family.add_metric(list(label_values), number)
            yield family


def new_registry(gauges: Sequence[GaugeSpec] = ()) -> CollectorRegistry:
    """A registry of its own (two apps in one test process must not share series)."""
    registry = CollectorRegistry()
    if gauges:
        registry.register(CallbackGauges(gauges))
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
