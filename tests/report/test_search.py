"""SLO search: the bracketing rule against a known capacity (pure; the search against
the simulator is in test_search_sim.py)."""

from __future__ import annotations

import pytest

from replay.ab import next_probe
from replay.ab._search import Probe


def _search(capacity: int, start: int, max_users: int, invalid: frozenset[int] = frozenset()
            ) -> tuple[dict[int, Probe], str]:
    probes: dict[int, Probe] = {}
    for _ in range(40):
        want, how = next_probe(probes, "t", start, max_users)
        if want is None:
            return probes, how
        assert want not in probes  # never runs the same load twice
        outcome = "invalid" if want in invalid else "meets" if want <= capacity else "fails"
        probes[want] = Probe(want, f"r{want}", "valid", {"t": outcome}, reason="starved")
    raise AssertionError("the search did not end")


@pytest.mark.parametrize("capacity", [1, 2, 3, 5, 8, 13, 37, 100, 255])
@pytest.mark.parametrize("start", [1, 4])
def test_bracketing_finds_a_known_capacity(capacity: int, start: int) -> None:
    probes, how = _search(capacity, start, max_users=256)
    met = [u for u, p in probes.items() if p.outcomes["t"] == "meets"]
    failed = [u for u, p in probes.items() if p.outcomes["t"] == "fails"]
    assert max(met) == capacity and min(failed) == capacity + 1, how
    assert how == "bracketed to one user"
    assert len(probes) <= 2 * 9 + 2  # doubling then halving: logarithmic


def test_bracketing_ends_at_the_cap_and_at_none() -> None:
    probes, how = _search(10_000, 1, max_users=64)
    assert how.startswith("at least") and max(probes) == 64
    probes, how = _search(0, 4, max_users=64)
    assert how.startswith("none") and sorted(probes) == [1, 2, 4]


def test_an_invalid_probe_stops_the_search_and_says_why() -> None:
    probes, how = _search(20, 1, max_users=64, invalid=frozenset({16}))
    assert how.startswith("stopped: the run at 16 users was invalid") and "starved" in how
    assert 32 not in probes
