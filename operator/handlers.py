"""The kopf handlers: `kopf run --standalone -A -m mqstore.operator.handlers`.

Thin by design: each handler runs one `reconcile` pass and stores its status; the pass
itself is in `reconcile.py` and the objects it builds in the pure builder modules.
kopf keeps its own state in annotations under mqstore.io/ (progress, the last handled
spec) and its finalizer is mqstore.io/finalizer (kopf adds it for the timer: deleting a
Broker waits until the operator has stopped the Broker's timer)."""

from __future__ import annotations

import datetime
import logging
import time
from typing import Any

import aiohttp
import kopf
import prometheus_client

from . import metrics, names
from .kube import ApiError, KubeApi, object_path
from .reconcile import reconcile
from .settings import settings_from_environment

SETTINGS = settings_from_environment()
"""Read at import: the timer's interval is fixed when the handlers are registered."""

Logger = logging.Logger | logging.LoggerAdapter[Any]

WATCH_SERVER_TIMEOUT_S = 300

RETRY_DELAY_S = 10.0
"""After a retryable failure (API server busy or unreachable, a conflict)."""

_kopf_settings: dict[str, kopf.OperatorSettings] = {}


def _login(settings: kopf.OperatorSettings) -> kopf.ConnectionInfo:
    """The service account's token inside a pod, else $KUBECONFIG (or ~/.kube/config)."""
    info = (kopf.login_with_service_account(settings=settings)
            or kopf.login_with_kubeconfig(settings=settings))
    if info is None:
        raise kopf.LoginError("no service account token and no kubeconfig to log in with")
    return info


API = KubeApi(lambda: _login(_kopf_settings["kopf"]))


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, logger: Logger, **_: Any) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=names.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=names.GROUP, key="last-handled-configuration")
    settings.persistence.finalizer = f"{names.GROUP}/finalizer"
    settings.posting.level = logging.WARNING  # only warnings become Kubernetes Events
    # A watch the server ends every 5 minutes, and a client deadline just after it: a
    # connection a load balancer dropped silently is noticed, not waited on forever.
    settings.watching.server_timeout = WATCH_SERVER_TIMEOUT_S
    settings.watching.client_timeout = WATCH_SERVER_TIMEOUT_S + 30
    _kopf_settings["kopf"] = settings
    if SETTINGS.metrics_port:
        prometheus_client.start_http_server(SETTINGS.metrics_port, registry=metrics.REGISTRY)
        logger.info("metrics on :%d/metrics", SETTINGS.metrics_port)


@kopf.on.cleanup()
async def close(**_: Any) -> None:
    await API.close()


@kopf.on.login()
def login(settings: kopf.OperatorSettings, **_: Any) -> kopf.ConnectionInfo:
    _kopf_settings["kopf"] = settings
    return _login(settings)


@kopf.on.resume(names.GROUP, names.VERSION, names.PLURAL)
@kopf.on.create(names.GROUP, names.VERSION, names.PLURAL)
@kopf.on.update(names.GROUP, names.VERSION, names.PLURAL)
async def on_change(body: kopf.Body, reason: str, logger: Logger, **_: Any) -> None:
    await run_pass(kopf.Reason(reason).value, body, logger)


@kopf.timer(names.GROUP, names.VERSION, names.PLURAL, interval=SETTINGS.resync_interval_s)
async def resync(body: kopf.Body, logger: Logger, **_: Any) -> None:
    """Level-based: the status follows the StatefulSet and claims, and drift is repaired,
    even when no change event arrives."""
    await run_pass("timer", body, logger)


async def _store_status(path: str, status: dict[str, Any]) -> bool:
    try:
        await API.merge_patch(path, {"status": status})
    except ApiError as error:
        if error.status == 404:
            return False
        raise
    return True


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def run_pass(trigger: str, body: kopf.Body, logger: Logger) -> None:
    broker: dict[str, Any] = {"metadata": dict(body.metadata), "spec": dict(body.spec),
                              "status": dict(body.status)}
    metadata = broker["metadata"]
    status_path = object_path(names.API_VERSION, names.KIND, metadata["namespace"],
                              metadata["name"]) + "/status"
    started = time.monotonic()
    try:
        outcome = await reconcile(API, broker, settings=SETTINGS, now=_now())
        if not await _store_status(status_path, outcome.status):
            return  # the Broker went away during the pass
    except (TimeoutError, ApiError, aiohttp.ClientError) as error:
        metrics.FAILURES.labels(trigger, type(error).__name__).inc()
        metrics.RECONCILES.labels(trigger, "retry").inc()
        raise kopf.TemporaryError(f"reconcile failed, retrying: {error}",
                                  delay=RETRY_DELAY_S) from error
    except Exception as error:
        metrics.FAILURES.labels(trigger, type(error).__name__).inc()
        metrics.RECONCILES.labels(trigger, "error").inc()
        raise
    finally:
        metrics.DURATION.labels(trigger).observe(time.monotonic() - started)
    metrics.RECONCILES.labels(trigger, outcome.result).inc()
    for event in outcome.events:
        metrics.EVENTS.labels(event.reason).inc()
        kopf.warn(body, reason=event.reason, message=event.message)
    logger.debug("reconciled (%s): %s", trigger, outcome.result)


