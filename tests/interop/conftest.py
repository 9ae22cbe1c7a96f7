"""Pytest wiring for the RocketMQ interop tests (JVM + Maven required; they fail, never skip)."""

from __future__ import annotations

import pytest

from tests.interop.rocketmq_jvm import ROCKETMQ_494, ROCKETMQ_VERSIONS, RocketMqJvm


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "interop: cross-checks mqstore against Apache RocketMQ 4.9.4 and 5.5.0 running on the "
        "JVM (needs java, javac, mvn and Maven Central on first run; deselect with "
        "-m 'not interop')",
    )


@pytest.fixture(scope="session")
def rocketmq_jvm() -> RocketMqJvm:
    """RocketMQ 4.9.4 (tests/interop/java), built once per session into .cache/interop/."""
    return RocketMqJvm.build(ROCKETMQ_494)


@pytest.fixture(scope="session", params=ROCKETMQ_VERSIONS, ids=lambda v: f"rocketmq-{v}")
def rocketmq(request: pytest.FixtureRequest) -> RocketMqJvm:
    """Each RocketMQ version the whole-store tests run against, built once per session."""
    version: str = request.param
    return RocketMqJvm.build(version)
