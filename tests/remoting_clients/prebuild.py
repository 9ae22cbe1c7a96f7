"""Build everything the remoting client tests run, before pytest: `python -m
tests.remoting_clients.prebuild`.

scripts/test.sh calls this outside any test's timeout: the first run downloads about 200 MB
of jars from Maven Central and the Go modules, and a test that did it would spend its time
limit waiting on the network.  Later runs find everything in `.cache/` and take a second.
"""

from __future__ import annotations

from tests.remoting_clients.go_client import GoClient
from tests.remoting_clients.java_clients import CLIENT_VERSIONS, JavaClients
from tests.remoting_clients.maven_build import build
from tests.remoting_clients.rocketmq_peer import PEER_PROJECT, ROCKETMQ_PEER_VERSION
from tests.remoting_clients.sql92_oracle import oracle_build


def main() -> None:
    peer = build(PEER_PROJECT, ROCKETMQ_PEER_VERSION,
                 required_jar=f"rocketmq-broker-{ROCKETMQ_PEER_VERSION}.jar")
    print(f"RocketMQ {ROCKETMQ_PEER_VERSION} name server and broker: {peer.lib_dir}")
    for version in CLIENT_VERSIONS:
        print(f"rocketmq-client {version}: {JavaClients.build(version).classpath}")
    print(f"rocketmq-client-go: {GoClient.build().binary}")
    print(f"rocketmq-filter (the SQL92 oracle): {oracle_build().classpath}")


if __name__ == "__main__":
    main()
