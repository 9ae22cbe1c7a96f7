"""Pytest wiring for the remoting client tests: the systems under test and the clients.

The seam for another target is `namesrv`: a session fixture parametrized over `TARGETS`,
each value naming a fixture `<target>_namesrv` that returns the name server address
("127.0.0.1:PORT") of a running system: "rocketmq" (Apache RocketMQ 5.5.0, the reference
that proves the harness right) and "mqstore" (`mqstore up`, whose remoting front answers as
name server and broker on one port).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.remoting.up_process import mqstore_up
from tests.remoting_clients.delay_levels import MQSTORE_ENV, TEST_DELAY_LEVELS
from tests.remoting_clients.java_clients import CLIENT_VERSIONS, JavaClients
from tests.remoting_clients.mqadmin import MqAdmin
from tests.remoting_clients.rocketmq_peer import RocketMqPeer
from tests.remoting_clients.transaction_checks import MQSTORE_TRANSACTION_ENV

TARGETS = ("rocketmq", "mqstore")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "remoting_clients: Apache RocketMQ's own Java and Go clients and mqadmin against a "
        "running name server and broker (needs java, javac, mvn, go and Maven Central / the Go "
        "module proxy on first run; deselect with -m 'not remoting_clients')",
    )


@pytest.fixture(scope="session")
def rocketmq_peer() -> Iterator[RocketMqPeer]:
    """Apache RocketMQ 5.5.0's name server and broker, async flush, for the whole session."""
    with RocketMqPeer.start(flush="async") as peer:
        yield peer


@pytest.fixture(scope="session")
def rocketmq_namesrv(rocketmq_peer: RocketMqPeer) -> str:
    return rocketmq_peer.namesrv


@pytest.fixture(scope="session")
def mqstore_namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mqstore up` on a fresh data directory for the whole session: its remoting port.
    It runs with the delay levels RocketMQ gets (delay_levels.py), and its transaction
    checks (transaction_checks.py)."""
    directory: Path = tmp_path_factory.mktemp("mqstore-up")
    with mqstore_up(directory, settings={MQSTORE_ENV: TEST_DELAY_LEVELS,
                                         **MQSTORE_TRANSACTION_ENV}) as ports:
        yield f"127.0.0.1:{ports['remoting']}"


@pytest.fixture(scope="session", params=TARGETS)
def namesrv(request: pytest.FixtureRequest) -> str:
    """The name server address of the system under test (one per entry of TARGETS)."""
    address: str = request.getfixturevalue(f"{request.param}_namesrv")
    return address


@pytest.fixture(scope="session", params=CLIENT_VERSIONS, ids=lambda v: f"client-{v}")
def java_clients(request: pytest.FixtureRequest) -> JavaClients:
    """The scenario program built against each rocketmq-client version."""
    version: str = request.param
    return JavaClients.build(version)


@pytest.fixture(scope="session")
def mqadmin() -> MqAdmin:
    """rocketmq-tools 5.5.0's mqadmin (the version of the reference broker)."""
    return MqAdmin(JavaClients.build("5.5.0"))


@pytest.fixture
def topic() -> str:
    """A topic no other test uses: every scenario starts from an empty topic."""
    return f"rc-{uuid.uuid4().hex[:12]}"
