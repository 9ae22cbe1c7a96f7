"""A seeded fuzz of every name-server handler (services/namesrv/handlers.py): random header
fields and bodies answer with a RocketMQ code and a remark, never a Python error (which
services/namesrv/server.py would answer as SYSTEM_ERROR with the exception's name), and
the tables stay within their bounds."""

from __future__ import annotations

import json
import random
import re

from mqstore.services.namesrv import handlers, registration
from mqstore.services.namesrv.route_table import QueueData
from mqstore.services.namesrv.run import build
from mqstore.services.namesrv.settings import NamesrvSettings
from mqstore.services.notifier.remoting.frame import Command

SETTINGS = NamesrvSettings(port=0, brokers_max=5, topics_per_broker_max=4, kv_entries_max=5)
FIELDS = ("brokerName", "brokerAddr", "clusterName", "haServerAddr", "brokerId", "topic",
          "cluster", "namespace", "key", "value", "compressed", "bodyCrc32",
          "enableActingMaster")
VALUES = ("a", "b", "h:1", "h:2", "c1", "0", "1", "-1", "true", "false", "x" * 300, "",
          "9" * 30, "\ud800", "ORDER_TOPIC_CONFIG")
PYTHON_ERROR = re.compile(r"^[A-Z][A-Za-z]*(Error|Exception):")


def random_body(rng: random.Random) -> bytes:
    topics = {f"t{n}": QueueData(read_queue_nums=rng.randint(0, 9),
                                 write_queue_nums=rng.randint(0, 9), perm=rng.randint(0, 7))
              for n in range(rng.randint(0, 6))}
    choice = rng.randrange(4)
    if choice == 0:
        return registration.encode_compressed(topics, {"counter": rng.randint(0, 3)})
    if choice == 1:
        return json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": {
            name: {"readQueueNums": data.read_queue_nums, "perm": data.perm}
            for name, data in topics.items()}, "dataVersion": {"counter": rng.randint(0, 3)}}
        }).encode()
    if choice == 2:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
    return b""


def test_random_requests_answer_with_codes_and_keep_the_bounds() -> None:
    rng = random.Random(2025)
    server = build(SETTINGS)
    codes = [*handlers.HANDLERS, 3, 999]
    for number in range(5_000):
        fields = {name: rng.choice(VALUES) for name in rng.sample(FIELDS, rng.randint(0, 8))}
        request = Command(rng.choice(codes), number, 0, fields, random_body(rng))
        answer = server.answer(request, connection_id=rng.randint(1, 4))
        assert answer is not None
        assert answer.opaque == number
        assert not PYTHON_ERROR.match(answer.remark or ""), (request, answer.remark)
        if rng.random() < 0.01:
            server.namesrv.routes.connection_closed(rng.randint(1, 4))
        routes = server.namesrv.routes
        assert len(routes.live) <= SETTINGS.brokers_max
        assert len(routes.groups) <= SETTINGS.brokers_max
        assert server.namesrv.kv.entries <= SETTINGS.kv_entries_max
