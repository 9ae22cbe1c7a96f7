"""The API client's pure parts: paths and the API server's error answers."""

from __future__ import annotations

import pytest

from mqstore.operator.kube import ApiError, _error, object_path


def test_paths_of_core_and_group_objects() -> None:
    assert object_path("v1", "ConfigMap", "ns", "x") == "/api/v1/namespaces/ns/configmaps/x"
    assert object_path("apps/v1", "StatefulSet", "ns") == \
        "/apis/apps/v1/namespaces/ns/statefulsets"
    assert object_path("mqstore.io/v1alpha1", "Broker", "a b", "c") == \
        "/apis/mqstore.io/v1alpha1/namespaces/a%20b/brokers/c"
    with pytest.raises(KeyError):
        object_path("v1", "ServiceAccount", "ns")


def test_a_status_answer_becomes_an_error_with_its_message() -> None:
    error = _error(422, '{"kind":"Status","reason":"Invalid","message":"spec: Forbidden"}',
                   request="PATCH /x")
    assert (error.status, error.reason, error.message) == (422, "Invalid", "spec: Forbidden")
    assert str(error) == "PATCH /x: 422 Invalid: spec: Forbidden"
    assert not error.retryable
    plain = _error(503, "upstream connect error", request="GET /y")
    assert plain.message == "upstream connect error"
    assert plain.retryable


@pytest.mark.parametrize(("status", "retryable"), [
    (400, False), (403, False), (404, False), (409, True), (422, False), (429, True),
    (500, True), (503, True)])
def test_which_errors_are_worth_retrying(status: int, retryable: bool) -> None:
    assert ApiError(status, "", "", request="r").retryable is retryable
