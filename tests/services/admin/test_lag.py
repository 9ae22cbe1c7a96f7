"""A group's lag on a topic: max_offset minus the committed offset, from min_offset where
the group never committed, never negative."""

from __future__ import annotations

from mqstore.services.admin.lag import lag, queue_lag

QUEUES = [{"queue_id": 0, "min_offset": 0, "max_offset": 10},
          {"queue_id": 1, "min_offset": 4, "max_offset": 7},
          {"queue_id": 2, "min_offset": 3, "max_offset": 3}]


def test_lag_sums_what_each_queue_has_left() -> None:
    assert lag(QUEUES, {0: 6, 1: 7, 2: 3}) == 4


def test_a_queue_never_committed_counts_from_its_min_offset() -> None:
    assert queue_lag(QUEUES[1], None) == 3
    assert lag(QUEUES, {0: 10}) == 3


def test_a_commit_past_the_end_is_no_lag() -> None:
    assert queue_lag(QUEUES[0], 12) == 0
    assert lag(QUEUES, {0: 12, 1: 9, 2: 3}) == 0


def test_no_queues_no_lag() -> None:
    assert lag([], {0: 5}) == 0
