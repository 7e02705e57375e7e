"""Paging tokens (memvault.services.paging): one codec for every listing, whose tokens
keep the format earlier pages were handed out in, and whose refusals are clean."""

from __future__ import annotations

import base64

import pytest

from memvault.services.paging import decode_after, encode_after
from memvault_wire.errors import ValidationFailed

MEMORY_ID = "mem_" + "0123456789abcdef" * 2


def test_a_token_names_the_key_and_its_format() -> None:
    token = encode_after(MEMORY_ID, version=2)
    # The format tokens already handed out were made in: a client may still hold one.
    assert token == (
        base64.urlsafe_b64encode(f'{{"v": 2, "after": "{MEMORY_ID}"}}'.encode())
        .decode()
        .rstrip("=")
    )
    assert decode_after(token, lambda key: key.startswith("mem_")) == MEMORY_ID


def test_no_key_is_no_token_and_no_token_is_the_first_page() -> None:
    assert encode_after(None, version=1) is None
    assert decode_after(None, lambda key: False) is None


@pytest.mark.parametrize(
    "token",
    [
        "not base64 !",
        base64.urlsafe_b64encode(b"not json").decode(),
        base64.urlsafe_b64encode(b'{"before": "x"}').decode(),
        base64.urlsafe_b64encode(b'{"after": 7}').decode(),
        base64.urlsafe_b64encode(b"[" * 5000).decode(),
        encode_after("evt-1", version=1),
    ],
)
def test_a_token_this_listing_did_not_make_is_a_validation_failure(token: str) -> None:
    with pytest.raises(ValidationFailed) as refused:
        decode_after(token, lambda key: key.startswith("mem_"))
    assert refused.value.details == {"field": "next_token"}
