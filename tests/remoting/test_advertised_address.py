"""`remoting.advertised_address`: routes and cluster info name it as the broker (a DNS name
allowed), while message ids keep `store.store_host`, an IP (a record stores it as binary);
empty, routes name `store.store_host` as before (services/common/settings/remoting.py)."""

from __future__ import annotations

import asyncio
import ipaddress
import json
from pathlib import Path

from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.server import answer_to
from mqstore.storage import StoreConfig
from tests.remoting.fronts import front_over

PEER = Peer("10.244.0.9:50000", 1)
ADVERTISED = "demo-0.demo-headless.ns1.svc:9876"
POD_ADDRESS = "10.244.0.7:9876"


def _ask(front: Front, code: int, ext: dict[str, str] | None = None) -> Command:
    answer = asyncio.run(answer_to(front, Command(code, 7, 0, dict(ext or {})), PEER))
    assert answer is not None
    assert answer.code == codes.SUCCESS, answer.remark
    return answer


def _create_topic(front: Front, topic: str) -> None:
    _ask(front, codes.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
        "defaultTopic": "TBW102", "topicFilterType": "SINGLE_TAG"})


def test_routes_and_cluster_info_name_the_advertised_address(tmp_path: Path) -> None:
    settings = RemotingSettings(port=0, advertised_address=ADVERTISED)
    with front_over(tmp_path, config=StoreConfig(store_host=POD_ADDRESS),
                    settings=settings) as front:
        _create_topic(front, "Orders")
        route = json.loads(_ask(front, codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "Orders"}).body)
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": ADVERTISED}
        cluster = json.loads(_ask(front, codes.GET_BROKER_CLUSTER_INFO).body)
        assert cluster["brokerAddrTable"]["mqstore"]["brokerAddrs"] == {"0": ADVERTISED}
        # An offset msg id embeds the STOREHOST: the pod's IP and port, never the name.
        packed = front.store_host_packed
        assert (str(ipaddress.ip_address(packed[:4])), int.from_bytes(packed[4:], "big")) \
            == ("10.244.0.7", 9876)
        assert front.store_host == POD_ADDRESS


def test_without_an_advertised_address_routes_name_the_store_host(tmp_path: Path) -> None:
    with front_over(tmp_path, config=StoreConfig(store_host=POD_ADDRESS)) as front:
        _create_topic(front, "Orders")
        route = json.loads(_ask(front, codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "Orders"}).body)
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": POD_ADDRESS}
