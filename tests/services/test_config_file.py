"""The services' YAML config: defaults < file < environment, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.services.common.settings.config_file import load_config
from mqstore.storage import ConfigError, FlushMode, PreallocateMethod, StoreConfig

FILE = """\
data_dir: /data
store:
  segment_size_bytes: 67108864
  flush_mode: sync
  preallocate_method: fallocate
  disk_max_used_ratio: 0.7
  delete_hours: [3, 4]
  pool_enabled: true
writer:
  port: 9001
  topic_queue_count: 16
notifier: {}
indexer:
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mqstore.yaml"
    path.write_text(text)
    return path


def test_file_values_reach_every_section(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, FILE), environ={})
    assert config.data_dir == Path("/data")
    assert config.store.segment_size_bytes == 64 << 20
    assert config.store.flush_mode is FlushMode.SYNC
    assert config.store.preallocate_method is PreallocateMethod.FALLOCATE
    assert config.store.disk_max_used_ratio == 0.7
    assert config.store.delete_hours == (3, 4)
    assert config.store.pool_enabled is True
    assert config.store.flush_interval_ms == StoreConfig().flush_interval_ms  # a default
    assert (config.writer.port, config.writer.topic_queue_count) == (9001, 16)
    assert (config.indexer.port, config.notifier.port) == (8082, 8083)


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    environ = {"MQSTORE_STORE__FLUSH_MODE": "async", "MQSTORE_WRITER__PORT": "8081",
               "MQSTORE_STORE__POOL_ENABLED": "no", "MQSTORE_STORE__DELETE_HOURS": "1,2,3",
               "MQSTORE_STORE__DISK_MAX_USED_RATIO": "0.5", "MQSTORE_DATA_DIR": "/elsewhere",
               "MQSTORE_WRITER__ACCESS_LOG_ENABLED": "true", "MQSTORE_NOT_A_SETTING": "x",
               "HOME": "/root"}
    config = load_config(_write(tmp_path, FILE), environ=environ)
    assert config.store.flush_mode is FlushMode.ASYNC
    assert config.writer.port == 8081
    assert config.store.pool_enabled is False
    assert config.store.delete_hours == (1, 2, 3)
    assert config.store.disk_max_used_ratio == 0.5
    assert config.data_dir == Path("/elsewhere")
    assert config.writer.access_log_enabled is True
    assert config.store.segment_size_bytes == 64 << 20  # the file still counts


def test_environment_alone_is_enough() -> None:
    config = load_config(None, environ={"MQSTORE_DATA_DIR": "/d"})
    assert config.store == StoreConfig()
    assert config.source == "defaults"


@pytest.mark.parametrize(("text", "environ", "message"), [
    ("data_dir: /d\nstore: {flush_mod: sync}\n", {}, "store.flush_mod: unknown setting"),
    ("data_dir: /d\nwriters: {}\n", {}, "unknown section 'writers'"),
    ("data_dir: /d\nwriter: {port: '8081'}\n", {}, "writer.port: '8081' is a string; "
                                                   "expected an integer"),
    ("data_dir: /d\nstore: {pool_enabled: 1}\n", {}, "store.pool_enabled: 1 is an integer"),
    ("data_dir: /d\nstore: {flush_mode: fast}\n", {}, "'fast' is not one of async, sync"),
    ("data_dir: /d\nstore: {delete_hours: [a]}\n", {}, "must be a list of integers"),
    ("data_dir: /d\nstore: {segment_size_bytes: 1000}\n", {}, "store: segment_size_bytes=1000"
                                                              " must be a multiple"),
    ("data_dir: /d\nwriter: {port: 70000}\n", {}, "writer: port=70000 must be in 0..65535"),
    ("data_dir: /d\nwriter: {log_level: loud}\n", {}, "log_level='loud' must be one of"),
    ("data_dir: /d\nwriter: {event_loop: trio}\n", {}, "event_loop='trio' must be one of"),
    ("data_dir: /d\nwriter: {request_body_size_bytes_max: 1024}\n", {},
     "cannot carry one largest message"),
    ("store: {}\n", {}, "data_dir is required"),
    ("- a list\n", {}, "must hold a mapping of sections"),
    ("data_dir: [\n", {}, "not valid YAML"),
    ("data_dir: /d\nstore: 5\n", {}, "store must be a mapping"),
    ("data_dir: /d\n", {"MQSTORE_WRITER__PROT": "1"}, "MQSTORE_WRITER__PROT: unknown setting"),
    ("data_dir: /d\n", {"MQSTORE_WRITR__PORT": "1"}, "unknown section 'writr'"),
    ("data_dir: /d\n", {"MQSTORE_WRITER__PORT": "eighty"}, "'eighty' is not an integer"),
    ("data_dir: /d\n", {"MQSTORE_STORE__POOL_ENABLED": "maybe"}, "'maybe' is not a boolean"),
    ("data_dir: /d\n", {"MQSTORE_STORE__FLUSH_MODE": "SYNC"}, "'SYNC' is not one of"),
])
def test_bad_config_names_the_key_and_where(tmp_path: Path, text: str,
                                            environ: dict[str, str], message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        load_config(path, environ=environ)
    assert message in str(error.value)
    where = next(iter(environ), str(path))
    assert where in str(error.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load_config(tmp_path / "absent.yaml", environ={})
