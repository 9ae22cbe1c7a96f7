"""The operator's settings from its environment: the drain's bounds and its namespace."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.operator.settings import SettingsError, settings_from_environment

NO_FILE = Path("/nonexistent/namespace")


def test_the_namespace_comes_from_the_environment_else_the_service_account(
        tmp_path: Path) -> None:
    namespace_file = tmp_path / "namespace"
    assert settings_from_environment({}, namespace_file=NO_FILE).namespace is None
    namespace_file.write_text("mqstore-system\n")
    assert settings_from_environment(
        {}, namespace_file=namespace_file).namespace == "mqstore-system"
    assert settings_from_environment(
        {"MQSTORE_OPERATOR_NAMESPACE": "ops"}, namespace_file=namespace_file).namespace == "ops"


def test_the_group_request_timeout_is_bounded() -> None:
    settings = settings_from_environment({}, namespace_file=NO_FILE)
    assert settings.group_request_timeout_s == 5.0
    assert settings_from_environment({"MQSTORE_OPERATOR_GROUP_REQUEST_TIMEOUT_S": "2.5"},
                                     namespace_file=NO_FILE).group_request_timeout_s == 2.5
    with pytest.raises(SettingsError, match=r"0\.1\.\.60"):
        settings_from_environment({"MQSTORE_OPERATOR_GROUP_REQUEST_TIMEOUT_S": "0"},
                                  namespace_file=NO_FILE)
