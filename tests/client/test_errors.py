"""The SDK's exception classes follow the server's error classes: every code the server
can answer has a class of its own, named as the server names it, with its status."""

from __future__ import annotations

import pytest

import memvault_client as sdk
from memvault_client import errors as client_errors
from memvault_client.errors import ERRORS_BY_CODE, MemvaultError, error_from_answer
from memvault_wire import errors as server


@pytest.mark.parametrize("server_class", server.ALL_ERRORS, ids=lambda c: c.code)
def test_every_server_error_code_maps_to_a_declared_client_class(
    server_class: type[server.MemvaultError],
) -> None:
    declared = getattr(client_errors, server_class.__name__)  # declared, not made at import
    assert ERRORS_BY_CODE[server_class.code] is declared
    assert getattr(sdk, server_class.__name__) is declared
    assert issubclass(declared, MemvaultError) and declared is not MemvaultError
    assert (server_class.code, server_class.status) == (declared.CODE, declared.STATUS)

    answer = server_class("refused", {"field": "content"})
    err = error_from_answer(answer.status, answer.to_body(), {"retry-after": "2"})
    assert type(err) is declared
    assert (err.code, err.message, err.details, err.status) == (
        server_class.code,
        "refused",
        {"field": "content"},
        server_class.status,
    )
    assert err.retry_after == 2.0
    assert err.to_body() == answer.to_body()


def test_the_codes_are_distinct_and_all_covered() -> None:
    assert set(ERRORS_BY_CODE) == {c.code for c in server.ALL_ERRORS}
    assert len(set(ERRORS_BY_CODE.values())) == len(server.ALL_ERRORS)


def test_an_unknown_code_maps_to_the_base_class() -> None:
    err = error_from_answer(418, {"error": {"code": "teapot", "message": "no", "details": {}}})
    assert type(err) is MemvaultError
    assert (err.code, err.status, err.message) == ("teapot", 418, "no")


def test_an_answer_without_the_error_body_is_a_bad_response() -> None:
    err = error_from_answer(502, {"message": "Internal server error"})
    assert type(err) is MemvaultError
    assert (err.code, err.status) == ("bad_response", 502)
    assert type(error_from_answer(500, None)) is MemvaultError
