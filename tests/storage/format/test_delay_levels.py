"""RocketMQ's delay level table (`messageDelayLevel`) and the due time of a schedule entry."""

from __future__ import annotations

import pytest

from mqstore.storage import StoreConfig
from mqstore.storage.errors import ConfigError
from mqstore.storage.format.delay_levels import (
    DEFAULT_DELAY_LEVELS,
    DelayLevels,
    delay_level,
)
from mqstore.storage.format.properties import encode_properties


def test_the_default_table_is_rocketmqs_eighteen_levels() -> None:
    levels = DelayLevels.parse(DEFAULT_DELAY_LEVELS)
    assert levels.max_level == 18
    assert [levels.delay_ms(n) for n in (1, 2, 3, 5, 17, 18)] == [
        1000, 5000, 10_000, 60_000, 3_600_000, 7_200_000]
    assert levels.delay_ms(0) is None and levels.delay_ms(19) is None
    assert StoreConfig().message_delay_levels == DEFAULT_DELAY_LEVELS


def test_units_and_clamping() -> None:
    levels = DelayLevels.parse("250s 2m 1h 1d")
    assert levels.delays_ms == (250_000, 120_000, 3_600_000, 86_400_000)
    assert levels.clamp(99) == 4 and levels.clamp(2) == 2


@pytest.mark.parametrize("text", ["", "1s  2s", "1x", "1.5s", "s", "1s,2s", " 1s"])
def test_a_table_rocketmq_would_not_load_is_refused_naming_the_setting(text: str) -> None:
    with pytest.raises(ConfigError, match="message_delay_levels"):
        StoreConfig(message_delay_levels=text)


def test_the_due_time_is_store_time_plus_the_levels_delay_clamped() -> None:
    levels = DelayLevels.parse("1s 2s 3s")
    assert levels.due_ms(1_000_000, 2) == 1_002_000
    assert levels.due_ms(1_000_000, 99) == 1_003_000  # clamped, as RocketMQ stamps it
    assert levels.due_ms(1_000_000, 0) == 1_001_000  # unknown: store + 1 s


@pytest.mark.parametrize(("properties", "level"), [
    ({}, 0), ({"DELAY": "3"}, 3), ({"DELAY": "-1"}, -1), ({"DELAY": "x"}, 0),
    ({"XDELAY": "5"}, 0), ({"TAGS": "a", "DELAY": "18"}, 18)])
def test_the_requested_level_is_read_from_encoded_properties(properties: dict[str, str],
                                                             level: int) -> None:
    assert delay_level(encode_properties(properties)) == level
