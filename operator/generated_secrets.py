"""The Secrets a Broker's pods mount: the generated ones created once, the named ones
checked (operator/pod_secrets.py builds and judges them)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from .kube import ApiError, KubeApi, object_path
from .pod_secrets import RANDOM_BYTES, build_generated_secret, secret_problem, secrets_in_use
from .spec import BrokerSpec


async def ensure_secrets(api: KubeApi, broker: Mapping[str, Any],
                         spec: BrokerSpec) -> list[str]:
    """Create each generated Secret that does not exist yet (an existing one is never
    touched: its random secret is what the pods and clients already use), and report
    each Secret the pods could not mount.  The random values go straight into the
    manifest; nothing logs them."""
    metadata = broker["metadata"]
    namespace = metadata["namespace"]
    problems = []
    for use in secrets_in_use(metadata["name"], spec).all():
        path = object_path("v1", "Secret", namespace, use.name)
        live = await api.get(path)
        if live is None and use.generated:
            manifest = build_generated_secret(
                broker, use, random_text=secrets.token_urlsafe(RANDOM_BYTES))
            try:
                await api.create(manifest)
            except ApiError as error:
                if error.retryable:
                    raise
                problems.append(f"Secret {use.name}: {error.message}")
            continue
        problem = secret_problem(use, live, namespace=namespace)
        if problem is not None:
            problems.append(problem)
    return problems
