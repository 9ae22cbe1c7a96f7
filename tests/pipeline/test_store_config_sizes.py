"""The Spark jobs' engine config takes every size from the store directory, whatever tool
made the store (issue 18, Found 7: a store made by `mqstore produce` failed
`df.write.format("mqstore")` with IndexFileFormatError, and `mqstore pipeline reindex`
wrote index files of the server's size).  No Spark session: the config is built on the
driver before any job."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.pipeline.store_config import store_config_from_options
from mqstore.services.cli.command import main
from mqstore.storage import Message, MessageStore, StoreConfig
from mqstore.storage.files.index_file import index_file_size_bytes
from mqstore.storage.store_sizes import EMBEDDED_SEGMENT_SIZE_BYTES


def _index_length(directory: Path) -> int:
    return next((directory / "index").iterdir()).stat().st_size


def test_a_store_made_by_produce_gives_its_own_sizes(tmp_path: Path) -> None:
    assert main(["produce", str(tmp_path), "--count", "20", "--segment-mib", "1"]) == 0
    config = store_config_from_options({}, directory=tmp_path)
    assert config.segment_size_bytes == 1 << 20
    assert index_file_size_bytes(hash_slot_count=config.index_hash_slot_count,
                                 index_count_max=config.index_count_max) == \
        _index_length(tmp_path)
    assert config.consume_queue_file_size_bytes == next(
        (tmp_path / "consumequeue" / "Demo" / "0").iterdir()).stat().st_size
    with MessageStore.open(tmp_path, config) as store:      # the engine agrees
        assert store.put(Message("Demo", 0, b"more")).ok


def test_a_new_store_gets_the_embedded_profile() -> None:
    config = store_config_from_options({}, directory=None)
    assert config.segment_size_bytes == EMBEDDED_SEGMENT_SIZE_BYTES


def test_an_option_the_files_contradict_is_refused(tmp_path: Path) -> None:
    assert main(["produce", str(tmp_path), "--count", "5", "--segment-mib", "1"]) == 0
    with pytest.raises(ValueError, match=r"store\.segment_size_bytes=2097152: the store's "
                                         r"files .* were made with 1048576"):
        store_config_from_options({"store.segment_size_bytes": str(2 << 20)},
                                  directory=tmp_path)


def test_an_index_of_unknown_counts_needs_them_given(tmp_path: Path) -> None:
    made = StoreConfig.for_small_segments(1 << 20, index_hash_slot_count=333,
                                          index_count_max=777)
    with MessageStore.open(tmp_path, made) as store:
        store.put(Message("Demo", 0, b"x", keys=("k",)))
    with pytest.raises(ValueError, match=r"give the options store\.index_hash_slot_count"):
        store_config_from_options({}, directory=tmp_path)
    config = store_config_from_options({"store.index_hash_slot_count": "333",
                                        "store.index_count_max": "777"}, directory=tmp_path)
    assert (config.index_hash_slot_count, config.index_count_max) == (333, 777)
    config = store_config_from_options({"store.index_count_max": "777"}, directory=tmp_path)
    assert config.index_hash_slot_count == 333
