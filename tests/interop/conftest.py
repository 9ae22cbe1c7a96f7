"""Pytest wiring for the RocketMQ interop tests (JVM + Maven required; they fail, never skip)."""

from __future__ import annotations

import pytest

from tests.interop.rocketmq_jvm import RocketMqJvm


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "interop: cross-checks mqstore against Apache RocketMQ 4.9.4 running on the JVM "
        "(needs java, javac, mvn and Maven Central on first run; deselect with -m 'not interop')",
    )


@pytest.fixture(scope="session")
def rocketmq_jvm() -> RocketMqJvm:
    """The Java side (tests/interop/java), built once per session into .cache/interop/."""
    return RocketMqJvm.build()
