"""SQL92 filters through the remoting front: CHECK_CLIENT_CONFIG (46), pulls that carry a
SQL92 subscription (lite pull) and pulls that take the heartbeat's (push), and each
refusal, as RocketMQ 5.5.0 answers them (services/notifier/remoting/filters.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.filters import FILTER_OFF
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.server import answer_to
from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from tests.conftest import small_config
from tests.remoting.client import heartbeat, records
from tests.remoting.fronts import front_over
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

PEER = Peer("10.0.0.9:50000", 1)
TOPIC = "Sql"
VALUES = ("3", "7", None, "x", "9", "6.5")
"""Property `a` of messages 0..5 (None: no `a`); message 4 has tag "other", the rest "tq"."""
FLAG_SUSPEND, FLAG_SUBSCRIPTION, FLAG_LITE = 0x2, 0x4, 0x10
VIEW_CONFIG = small_config(store_host="127.0.0.1:9876")
"""The writer's segment size (the view reads its files), and a store host for msg ids."""


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store for the module: the six messages on queue 0 of TOPIC, dispatched."""
    directory = tmp_path_factory.mktemp("sql") / "store"
    with MessageStore.open(directory, writer_config()) as writer, \
            Indexer.open(directory, indexer_config()) as indexer:
        for index, value in enumerate(VALUES):
            assert writer.put(Message(TOPIC, 0, b"m%d" % index,
                                      tags="other" if index == 4 else "tq",
                                      properties={} if value is None else {"a": value})).ok
        wait_dispatched(indexer, writer.committed_position)
    return directory


@pytest.fixture
def front(store_dir: Path) -> Iterator[Front]:
    with front_over(store_dir, config=VIEW_CONFIG) as served:
        served.view.refresh()
        yield served


@pytest.fixture
def front_filter_off(store_dir: Path) -> Iterator[Front]:
    with front_over(store_dir, config=VIEW_CONFIG, settings=RemotingSettings(
            port=0, property_filter_enabled=False)) as served:
        served.view.refresh()
        yield served


def ask(front: Front, code: int, ext: dict[str, str] | None = None,
        body: bytes = b"") -> Command:
    answer = asyncio.run(answer_to(front, Command(code, 11, 0, dict(ext or {}), body), PEER))
    assert answer is not None
    return answer


def check(front: Front, expression: str | None, kind: str | None = "SQL92") -> Command:
    data: dict[str, object] = {"topic": TOPIC, "subString": expression}
    if kind is not None:
        data["expressionType"] = kind
    return ask(front, codes.CHECK_CLIENT_CONFIG, body=json.dumps({
        "clientId": "c@1", "group": "g", "subscriptionData": data}).encode())


def pull(front: Front, *, code: int = codes.PULL_MESSAGE, group: str = "g",
         expression: str | None = None, kind: str = "SQL92", sub_version: int = 0,
         topic: str = TOPIC) -> Command:
    """A lite pull when `expression` is given (subscription flag), else a push pull."""
    header = {"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0",
              "maxMsgNums": "32", "commitOffset": "0", "suspendTimeoutMillis": "0",
              "subVersion": str(sub_version), "expressionType": kind,
              "sysFlag": str(FLAG_SUSPEND if expression is None
                             else FLAG_SUSPEND | FLAG_SUBSCRIPTION | FLAG_LITE)}
    if expression is not None:
        header["subscription"] = expression
    return ask(front, code, header)


def received(answer: Command) -> list[str | None]:
    assert answer.code == codes.SUCCESS, (answer.code, answer.remark)
    assert answer.ext_fields["nextBeginOffset"] == str(len(VALUES))
    return [message.properties.get("a") for message in records(answer.body)]


def register(front: Front, group: str, expression: str, kind: str = "SQL92",
             sub_version: int = 100) -> None:
    answer = ask(front, codes.HEART_BEAT, body=heartbeat(
        f"{group}@1", group, TOPIC, expression, expression_type=kind, sub_version=sub_version))
    assert answer.code == codes.SUCCESS
    assert answer.version >= 232  # below it, a Java client refuses SQL92 pulls


def test_check_client_config_answers_what_a_consumer_start_needs(front: Front) -> None:
    assert check(front, "a > 5").code == codes.SUCCESS
    assert check(front, "a > 5 xyz").code == codes.SUCCESS  # RocketMQ ignores the rest
    assert check(front, "*", "TAG").code == codes.SUCCESS
    assert check(front, "*", None).code == codes.SUCCESS
    assert ask(front, codes.CHECK_CLIENT_CONFIG).code == codes.SUCCESS  # no body
    assert ask(front, codes.CHECK_CLIENT_CONFIG, body=b'{"group":"g"}').code == codes.SUCCESS
    for refused in ("a >", "", "a = NULL", "NOT a > 5"):
        answer = check(front, refused)
        assert answer.code == codes.SUBSCRIPTION_PARSE_FAILED, refused
        assert answer.remark
    assert check(front, "a > 5", "sql92").code == codes.SUBSCRIPTION_PARSE_FAILED
    assert ask(front, codes.CHECK_CLIENT_CONFIG, body=b"not json").code == codes.SYSTEM_ERROR


def test_check_client_config_with_the_filter_off(front_filter_off: Front) -> None:
    answer = check(front_filter_off, "a > 5")
    assert (answer.code, answer.remark) == (codes.SYSTEM_ERROR, FILTER_OFF)
    assert check(front_filter_off, "TagA || TagB", "TAG").code == codes.SUCCESS


@pytest.mark.parametrize("code", [codes.PULL_MESSAGE, codes.LITE_PULL_MESSAGE])
@pytest.mark.parametrize(("expression", "passed"), [
    ("a > 5", ["7", "9"]),
    ("a > 5 AND TAGS = 'tq'", ["7"]),
    ("NOT (a > 5)", ["3"]),
    ("a > 5.0", ["7", "9", "6.5"]),
    ("a IS NULL OR a = 'x'", [None, "x"]),
])
def test_a_pull_with_its_sql92_subscription(front: Front, code: int, expression: str,
                                            passed: list[str | None]) -> None:
    assert received(pull(front, code=code, expression=expression)) == passed


def test_a_pull_whose_sql92_matches_nothing_moves_past_the_scan(front: Front) -> None:
    answer = pull(front, expression="a > 100")
    assert answer.code == codes.PULL_RETRY_IMMEDIATELY
    assert answer.ext_fields["nextBeginOffset"] == str(len(VALUES))


def test_a_pull_with_a_refused_sql92_subscription(front: Front,
                                                  front_filter_off: Front) -> None:
    for refused in ("a >", ""):
        assert pull(front, expression=refused).code == codes.SUBSCRIPTION_PARSE_FAILED
    assert pull(front, expression="a > 5", kind="FOO").code == codes.SUBSCRIPTION_PARSE_FAILED
    off = pull(front_filter_off, expression="a > 5")
    assert (off.code, off.remark) == (codes.SYSTEM_ERROR, FILTER_OFF)
    assert len(received(pull(front_filter_off, expression="tq", kind="TAG"))) == 5


def test_a_push_pull_takes_the_heartbeats_sql92(front: Front) -> None:
    register(front, "push", "a > 5 AND TAGS = 'tq'")
    assert received(pull(front, group="push", sub_version=100)) == ["7"]
    # the heartbeat's type rules, whatever the pull says
    assert received(pull(front, group="push", kind="TAG", sub_version=100)) == ["7"]
    newer = pull(front, group="push", sub_version=101)
    assert newer.code == codes.SUBSCRIPTION_NOT_LATEST
    assert pull(front, group="nobody").code == codes.SUBSCRIPTION_NOT_EXIST
    register(front, "typo", "a >")
    assert pull(front, group="typo", sub_version=100).code == codes.FILTER_DATA_NOT_EXIST


def test_a_push_pull_of_tags_is_served_as_before(front: Front) -> None:
    """TAG pulls stay lenient: no heartbeat, or an older one, serves what it registered."""
    assert len(received(pull(front, group="nobody", kind="TAG"))) == len(VALUES)
    register(front, "tagged", "other", kind="TAG", sub_version=1)
    assert received(pull(front, group="tagged", kind="TAG", sub_version=5)) == ["9"]


def test_a_push_pull_with_the_filter_off(front_filter_off: Front) -> None:
    register(front_filter_off, "push", "a > 5")
    off = pull(front_filter_off, group="push", sub_version=100)
    assert (off.code, off.remark) == (codes.SYSTEM_ERROR, FILTER_OFF)
    register(front_filter_off, "typo", "a >")  # RocketMQ: no filter data first
    assert pull(front_filter_off, group="typo", sub_version=100).code == \
        codes.FILTER_DATA_NOT_EXIST


def test_the_retry_topic_is_not_sql_filtered(front: Front) -> None:
    """A push consumer subscribes `%RETRY%<group>` with `*`: its retries are all served."""
    body = json.loads(heartbeat("r@1", "r", TOPIC, "a > 5", expression_type="SQL92"))
    body["consumerDataSet"][0]["subscriptionDataSet"].append({
        "topic": "%RETRY%r", "subString": "*", "expressionType": "TAG", "subVersion": 100,
        "tagsSet": [], "codeSet": []})
    assert ask(front, codes.HEART_BEAT, body=json.dumps(body).encode()).code == codes.SUCCESS
    retry = pull(front, group="r", topic="%RETRY%r", kind="TAG", sub_version=100)
    assert retry.code in (codes.PULL_NOT_FOUND, codes.PULL_OFFSET_MOVED)  # empty, not refused
