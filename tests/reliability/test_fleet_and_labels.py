"""Issue 38 items 1 and 2: one server given twice is not a fleet, and an arm label
that cannot name a run directory found again is refused before any load.

``run --target U --target U/v1`` (or ``localhost`` beside ``127.0.0.1``) measured one
server as two replicas, halving every per-GPU figure; ``compare --arm .a=...`` ran
both arms and then dropped ``.a`` (its hidden run directories are skipped when runs
are read back), and ``..`` or ``../x`` sent all the load before failing. Every refusal
here is one line, exit 2, and names the flag; the servers are dead ports, so a
refusal that came after trying to load would say it cannot reach them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import duplicate_replica, replica_key
from replay.cli import main
from replay.servers.sim import free_port
from tests.replay.conftest import make_workload


@pytest.fixture(scope="module")
def wl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workload(tmp_path_factory.mktemp("fl") / "wl.jsonl", sessions=1, turns=1)


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *words: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "cannot reach" not in err, err  # refused before any server was asked
    assert all(w in lines[0] for w in words), (words, lines[0])
    return lines[0]


@pytest.mark.parametrize(("a", "b"), [
    ("http://127.0.0.1:{p}", "http://127.0.0.1:{p}/v1"),
    ("http://127.0.0.1:{p}", "http://localhost:{p}"),
    ("http://localhost:{p}/", "http://[::1]:{p}/v1/"),
    ("http://HOST:80", "http://host/v1"),
    ("https://h", "https://h:443/"),
    ("http://u:pw@127.0.0.1:{p}", "http://127.0.0.1:{p}"),
])
def test_one_server_written_two_ways_is_one_replica(a: str, b: str) -> None:
    p = 8123
    a, b = a.format(p=p), b.format(p=p)
    assert replica_key(a) == replica_key(b)
    said = duplicate_replica([a, b])
    assert said is not None and "give each replica once" in said
    assert "pw" not in said


@pytest.mark.parametrize(("a", "b"), [
    ("http://127.0.0.1:1", "http://127.0.0.1:2"),
    ("http://h:80", "https://h:80"),
    ("http://a:8000", "http://b:8000"),
    ("http://h:8000/x", "http://h:8000/y"),
])
def test_distinct_servers_stay_a_fleet(a: str, b: str) -> None:
    assert duplicate_replica([a, b]) is None


@pytest.mark.parametrize("second", ["http://127.0.0.1:{p}/v1", "http://localhost:{p}",
                                    "http://127.0.0.1:{p}//"])
@pytest.mark.sim
def test_run_refuses_one_server_as_two_replicas(
        second: str, wl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = free_port()
    out = tmp_path / "run"
    _refused(["run", "--target", f"http://127.0.0.1:{p}", "--target", second.format(p=p),
              "--workload", str(wl), "--duration", "1", "--out", str(out), "--quiet"],
             capsys, "--target", "give each replica once")
    assert not out.exists()


@pytest.mark.sim
def test_compare_arm_fleet_follows_the_same_rule(
        wl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p, q = free_port(), free_port()
    _refused(["compare", "--arm", f"a=http://localhost:{p},http://127.0.0.1:{p}/v1",
              "--arm", f"b=http://127.0.0.1:{q}", "--workload", str(wl), "--duration", "1",
              "--out", str(tmp_path / "cmp"), "--quiet"],
             capsys, "--arm a", "same server", "give each replica once")


_BAD = [".a", "..", "../x", "a/b", "a\\b", "x y", "-a", "a\x00b", "a" * 65, "é/x"]


@pytest.mark.sim
@pytest.mark.parametrize("label", _BAD)
def test_compare_refuses_a_bad_label_before_any_load(
        label: str, wl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "cmp"
    _refused(["compare", f"--arm={label}={dead}", "--arm", f"b={dead}", "--workload",
              str(wl), "--duration", "1", "--out", str(out), "--quiet"], capsys, "--arm")
    assert not (out / "runs").exists()
    assert not (tmp_path / "x").exists()


@pytest.mark.sim
@pytest.mark.parametrize("label", [".a", "../x"])
def test_search_refuses_a_bad_label_before_any_load(
        label: str, wl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "s"
    _refused(["compare", f"--arm={label}={dead}", "--arm", f"b={dead}", "--workload",
              str(wl), "--duration", "1", "--out", str(out), "--search", "30:15",
              "--quiet"], capsys, "--arm")
    assert not (out / "runs").exists()


@pytest.mark.sim
@pytest.mark.parametrize("label", [".hidden", "a/b", "../up"])
def test_run_refuses_a_bad_label(label: str, wl: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    _refused(["run", "--target", f"http://127.0.0.1:{free_port()}", f"--label={label}",
              "--workload", str(wl), "--duration", "1", "--out", str(out), "--quiet"],
             capsys, "--label")
    assert not out.exists()


@pytest.mark.parametrize("label", ["auto", "latency_specialized", "fp8-kv.v2", "A+B", "été"])
def test_ordinary_labels_are_kept(label: str) -> None:
    from replay.load import label_problem

    assert label_problem(label) is None
