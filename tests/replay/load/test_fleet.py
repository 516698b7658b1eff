"""Routing over a fleet's replicas and the fleet settings (no server needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from replay.ab import CompareOptions
from replay.cli import main
from replay.errors import ConfigError
from replay.load import FleetCache, RunSettings, split_targets
from tests.support.workloads import make_workload

_BS = 4


def _prompt(*blocks: int) -> np.ndarray:
    return np.repeat(np.array(blocks, dtype=np.int32), _BS)


def test_affinity_pins_a_session_to_the_least_loaded_replica() -> None:
    fleet = FleetCache(_BS, 2, "affinity")
    got = [fleet.observe(_prompt(1, 2), 0, scope).replica for scope in "abcd"]
    assert got == [0, 1, 0, 1]
    assert fleet.observe(_prompt(1, 2, 3), 0, "c").replica == 0  # every turn: same replica
    fleet.end_scope("b")  # replica 1 now has one session alive, replica 0 two
    assert fleet.observe(_prompt(9), 0, "e").replica == 1
    fleet.end_scope("a")
    fleet.end_scope("c")  # 0 alive on replica 0, 2 on replica 1
    assert fleet.observe(_prompt(9), 0, "f").replica == 0
    assert fleet.alive == [1, 2] and fleet.given == [3, 3]


def test_round_robin_sends_each_request_to_the_next_replica() -> None:
    fleet = FleetCache(_BS, 3, "round-robin")
    got = [fleet.observe(_prompt(1), 0, scope).replica for scope in "aaabbbb"]
    assert got == [0, 1, 2, 0, 1, 2, 0]


def test_each_replica_has_its_own_prefix_cache() -> None:
    """A prefix cached on one server does not help a request sent to another."""
    fleet = FleetCache(_BS, 2, "round-robin")
    shared = 2 * _BS  # the first two blocks are the workload's shared prefix
    first = fleet.observe(_prompt(1, 2, 3), shared, "a")
    fleet.extend(first, [7] * (_BS + 1))
    second = fleet.observe(_prompt(1, 2, 5), shared, "b")  # replica 1: cold
    third = fleet.observe(_prompt(1, 2, 6), shared, "c")  # replica 0: shared prefix warm
    assert (first.replica, second.replica, third.replica) == (0, 1, 0)
    assert (first.expected, second.expected, third.expected) == (0, 0, 2 * _BS)
    fleet.end_scope("a")  # forgotten on every replica
    assert all("a" not in c._scopes for c in fleet.caches)


def test_fleet_settings() -> None:
    one = RunSettings(target="http://127.0.0.1:1", duration_s=1)
    assert one.fleet == ("http://127.0.0.1:1",) and one.targets == ()
    assert RunSettings(target="http://a:1", targets=("http://a:1",), duration_s=1).targets == ()
    two = RunSettings(target="http://a:1", targets=("http://a:1", "http://b:1"), duration_s=1)
    assert two.fleet == ("http://a:1", "http://b:1") and two.routing == "affinity"
    opts = CompareOptions(duration_s=1.0)
    run = opts.config("http://a:1,http://b:1", 2, "auto")
    assert run.target == "http://a:1" and run.fleet == ("http://a:1", "http://b:1")
    assert opts.config("http://a:1", 2, "auto").targets == ()
    with pytest.raises(ConfigError, match="--arm 'http://a:1,': give the replicas' URLs"):
        split_targets("http://a:1,")
    with pytest.raises(ConfigError, match="--arm: http://a:1 is given twice"):
        split_targets("http://a:1,http://u:p@a:1/")


@pytest.mark.parametrize(("targets", "message"), [
    (["http://127.0.0.1:1", "http://u:p@127.0.0.1:1/"], "http://127.0.0.1:1 is given twice"),
    (["http://127.0.0.1:1", "ftp://x"], "--target: 'ftp://x' is not an http(s) URL"),
])
def test_bad_targets_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  targets: list[str], message: str) -> None:
    args = ["run", "--workload", str(tmp_path / "none.jsonl"), "--duration", "1",
            "--out", str(tmp_path / "run"), "--quiet"]
    for t in targets:
        args += ["--target", t]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and ":p@" not in err


def test_replicas_with_different_credentials_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=1, turns=1)
    assert main(["run", "--target", "http://u:one@127.0.0.1:1", "--target",
                 "http://u:two@127.0.0.1:2", "--workload", str(wl), "--duration", "1",
                 "--out", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "different credentials" in err and ":one@" not in err and ":two@" not in err


def test_experiment_file_never_holds_url_credentials(tmp_path: Path) -> None:
    """``compare --save-config`` writes a fleet arm's URLs without ``user:password@``."""
    wl = make_workload(tmp_path / "wl.jsonl", sessions=1, turns=1)
    saved = tmp_path / "exp.toml"
    assert main(["compare", "--arm", "auto=http://u:s3cret@127.0.0.1:1,http://127.0.0.1:2",
                 "--arm", "latency_specialized=http://127.0.0.1:3", "--workload", str(wl),
                 "--duration", "1", "--out", str(tmp_path / "cmp"),
                 "--save-config", str(saved)]) == 0
    text = saved.read_text()
    assert "s3cret" not in text
    assert '"auto=http://127.0.0.1:1,http://127.0.0.1:2"' in text
