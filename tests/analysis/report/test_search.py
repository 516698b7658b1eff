"""SLO search: the bracketing rule against a known capacity (pure; the search against
the simulator is in test_search_sim.py, the command's limits and resume in
tests/compare/test_search_cli.py)."""

from __future__ import annotations

import pytest

from replay.ab import next_probe
from replay.ab._search import Probe, _bracket


def _search(capacity: int, start: int, max_users: int, invalid: frozenset[int] = frozenset(),
            precision: float | None = None, flaky: frozenset[int] = frozenset(),
            ) -> tuple[dict[int, Probe], str, str]:
    """Run next_probe against a fake judge: a count meets the tier when it is at most
    ``capacity`` (``flaky`` counts answer the other way)."""
    probes: dict[int, Probe] = {}
    for _ in range(40):
        want, ended, how = next_probe(probes, "t", start, max_users, precision)
        if want is None:
            return probes, ended, how
        assert want not in probes  # never runs the same load twice
        meets = (want <= capacity) != (want in flaky)
        outcome = "invalid" if want in invalid else "meets" if meets else "fails"
        probes[want] = Probe(want, f"r{want}", "valid", {"t": outcome}, reason="starved")
    raise AssertionError("the search did not end")


@pytest.mark.parametrize("capacity", [1, 2, 3, 5, 6, 8, 13, 37, 100, 255])
@pytest.mark.parametrize("start", [1, 2, 4])
def test_bisection_reaches_a_one_user_bracket_around_a_known_capacity(
        capacity: int, start: int) -> None:
    probes, ended, how = _search(capacity, start, max_users=256)
    b = _bracket(probes, "t")
    assert b is not None and (b.passed, b.failed) == (capacity, capacity + 1), how
    assert b.text() == f"between {capacity} and {capacity + 1} users"
    assert (ended, how) == ("bracketed", "bracketed to one user")
    assert len(probes) <= 2 * 9 + 2  # doubling then halving: logarithmic


@pytest.mark.parametrize("capacity", [6, 37, 100, 200])
def test_a_relative_precision_stops_earlier_and_still_holds_the_truth(capacity: int) -> None:
    fine, _, _ = _search(capacity, 1, max_users=256)
    probes, ended, how = _search(capacity, 1, max_users=256, precision=0.1)
    b = _bracket(probes, "t")
    assert b is not None and b.passed is not None and b.failed is not None
    assert b.passed <= capacity < b.failed
    assert b.failed - b.passed <= 1 or (b.failed - b.passed) / b.passed <= 0.1
    assert ended == "bracketed" and len(probes) <= len(fine)
    if b.failed - b.passed > 1:
        assert how == "bracketed to within 10%"


def test_bracketing_ends_at_the_cap_and_below_one_user() -> None:
    probes, ended, how = _search(10_000, 1, max_users=64)
    assert ended == "at least" and max(probes) == 64
    assert _bracket(probes, "t").text() == "at least 64 users"  # type: ignore[union-attr]
    probes, ended, how = _search(0, 4, max_users=64)
    assert ended == "below" and sorted(probes) == [1, 2, 4]
    assert _bracket(probes, "t").text() == "below 1 user"  # type: ignore[union-attr]


def test_an_invalid_probe_stops_the_search_and_says_why() -> None:
    probes, ended, how = _search(20, 1, max_users=64, invalid=frozenset({16}))
    assert ended == "invalid"
    assert how.startswith("stopped: the run at 16 users was invalid") and "starved" in how
    assert 32 not in probes
    b = _bracket(probes, "t")  # the bracket as far as it got, invalid probes left out
    assert b is not None and (b.passed, b.failed) == (8, None)


def test_not_monotone_probes_bracket_below_the_first_failure() -> None:
    """A count that fails below the true capacity (noise) ends the bracket there, as in
    the sweep's capacity table; the search does not hide it."""
    probes, ended, _ = _search(20, 1, max_users=64, flaky=frozenset({8}))
    b = _bracket(probes, "t")
    assert b is not None and ended == "bracketed"
    assert (b.passed, b.failed) == (7, 8) and 16 not in probes


def test_probes_shared_with_another_tier_can_show_non_monotone_results() -> None:
    probes = {u: Probe(u, f"r{u}", "valid", {"t": o}) for u, o in
              [(4, "meets"), (8, "fails"), (16, "meets"), (6, "meets"), (7, "meets")]}
    b = _bracket(probes, "t")
    assert b is not None and (b.passed, b.failed, b.passed_above) == (7, 8, [16])
    assert next_probe(probes, "t", 1, 64)[1] == "bracketed"
