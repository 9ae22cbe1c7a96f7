"""Where `mqstore admin` finds the services: `mqstore up`'s defaults, the config file, the
URLs given (services/admin/endpoints.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.services.admin.client import AdminError
from mqstore.services.admin.endpoints import find_endpoints


def test_defaults_are_mqstore_ups_ports() -> None:
    found = find_endpoints(config=None, notifier_url=None, writer_url=None, indexer_url=None)
    assert (found.writer_url, found.indexer_url, found.notifier_url) == (
        "http://127.0.0.1:8081", "http://127.0.0.1:8082", "http://127.0.0.1:8083")


def test_the_config_file_names_hosts_and_ports_and_a_url_given_wins(tmp_path: Path) -> None:
    config = tmp_path / "mqstore.yaml"
    config.write_text(f"data_dir: {tmp_path}\nwriter: {{port: 18081}}\n"
                      "indexer: {port: 18082, host: 10.1.2.3}\n"
                      "notifier: {port: 18083, host: 0.0.0.0}\n")
    found = find_endpoints(config=config, notifier_url=None, writer_url=None,
                           indexer_url="http://127.0.0.1:9/")
    assert (found.writer_url, found.indexer_url, found.notifier_url) == (
        "http://127.0.0.1:18081", "http://127.0.0.1:9", "http://127.0.0.1:18083")


def test_a_port_chosen_at_start_or_a_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "mqstore.yaml"
    config.write_text(f"data_dir: {tmp_path}\nindexer: {{port: 0}}\n")
    with pytest.raises(AdminError, match=r"indexer.port is 0 .* give the indexer's URL"):
        find_endpoints(config=config, notifier_url=None, writer_url=None, indexer_url=None)
    with pytest.raises(AdminError, match="no such file"):
        find_endpoints(config=tmp_path / "nothing.yaml", notifier_url=None, writer_url=None,
                       indexer_url=None)
    with pytest.raises(AdminError, match="--writer-url 'http://h:x'"):
        find_endpoints(config=None, notifier_url=None, writer_url="http://h:x",
                       indexer_url=None)
