"""The deep-paging cursor: opaque, compact, and bound to the arguments it was made for."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage._paging.cursor import decode_cursor, encode_cursor, fingerprint


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["pit", "offset", "after", "fp"]), st.text(max_size=40) | st.integers()))
def test_a_cursor_round_trips_what_it_carries(state: dict[str, object]) -> None:
    token = encode_cursor(state)
    assert token.isascii()
    assert "=" not in token
    decoded = decode_cursor(token)
    assert {k: v for k, v in decoded.items() if k != "v"} == state


@pytest.mark.parametrize("token", ["", "not-a-cursor", "eyJ2IjoxfQ", encode_cursor({"x": 1})[:-3]])
def test_a_foreign_or_damaged_string_is_not_a_cursor(token: str) -> None:
    with pytest.raises(ValueError, match="cursor"):
        decode_cursor(token)


def test_the_fingerprint_changes_with_any_argument_that_widens_a_search() -> None:
    base = {"query": "q", "filters": [{"term": {"tenant_id": "a"}}], "mode": "hybrid"}
    assert fingerprint(base) == fingerprint(dict(base))
    assert fingerprint(base) != fingerprint({**base, "filters": []})
    assert fingerprint(base) != fingerprint({**base, "filters": [{"term": {"tenant_id": "b"}}]})
