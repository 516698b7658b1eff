"""No result is lost or silently replaced, and every user error is one line.

``run --out`` on a run refuses unless ``--force`` (which clears the old files
first); an ``--out`` that is a file or cannot be written is refused before any
server is asked; out-of-range seeds and ports name their flag.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from replay.cli import build_parser
from replay.servers.sim import SimServerProcess, free_port
from tests.support.commands import call as _call
from tests.support.runs import manifest
from tests.support.workloads import make_workload


@pytest.fixture(scope="module")
def sim(uses_sim: None) -> Iterator[str]:
    with SimServerProcess("instant", time_scale=1.0) as srv:
        yield srv.url


@pytest.fixture(scope="module")
def wl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workload(tmp_path_factory.mktemp("kept") / "wl.jsonl", sessions=2, turns=2,
                         output=4, think_s=0.0)


def _run(target: str, wl: Path, out: Path, *extra: str) -> tuple[int, str]:
    return _call(["run", "--target", target, "--workload", str(wl), "--duration", "0.5",
                  "--drain", "0.5", "--out", str(out), "--quiet", "--vocab-size", "1000",
                  *extra])


def _digest(run: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(run.iterdir())}


def _one_line(err: str, *words: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.startswith("agentreplay: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), (words, lines[0])


def test_a_finished_run_is_kept_unless_forced(sim: str, wl: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    code, err = _run(sim, wl, out)
    assert code in (0, 3), err
    first = manifest(out).run_id
    (out / "report.html").write_text("an old report")
    (out / "summary.json").write_text("{}")
    before = _digest(out)
    code, err = _run(sim, wl, out)
    assert code == 2
    _one_line(err, "--out", str(out), "--force")
    assert _digest(out) == before  # untouched
    code, err = _run(sim, wl, out, "--force")
    assert code in (0, 3), err
    assert manifest(out).run_id != first
    assert not (out / "report.html").exists() and not (out / "summary.json").exists()


def test_a_crashed_run_is_kept_too(sim: str, wl: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "requests.jsonl").write_text('{"id": "x"}\n')
    code, err = _run(sim, wl, out)
    assert code == 2
    _one_line(err, "--out", "requests.jsonl")
    assert (out / "requests.jsonl").read_text() == '{"id": "x"}\n'


@pytest.mark.sim
@pytest.mark.parametrize("where", ["file", "under_file", "proc"])
def test_unwritable_out_is_refused_before_any_server(wl: Path, tmp_path: Path,
                                                     where: str) -> None:
    a_file = tmp_path / "f.txt"
    a_file.write_text("keep me")
    out = {"file": a_file, "under_file": a_file / "run", "proc": Path("/proc/nope/run")}[where]
    dead = f"http://127.0.0.1:{free_port()}"  # "cannot reach" would mean it asked first
    code, err = _run(dead, wl, out)
    assert code == 2
    _one_line(err, "--out")
    assert "cannot reach" not in err
    assert a_file.read_text() == "keep me"


@pytest.mark.sim
@pytest.mark.parametrize(("args", "flag"), [
    (["--seed", str(2**80)], "--seed"),
    (["--seed", "-1"], "--seed"),
    (["--ttft-timeout", "0"], "--ttft-timeout"),
    (["--itl-timeout", "-1"], "--itl-timeout"),
    (["--itl-timeout", "nan"], "--itl-timeout"),
])
def test_out_of_range_values_name_their_flag(wl: Path, tmp_path: Path, args: list[str],
                                             flag: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    code, err = _run(dead, wl, tmp_path / "run", *args)
    assert code == 2
    _one_line(err, flag)


def test_target_port_out_of_range(wl: Path, tmp_path: Path) -> None:
    code, err = _call(["run", "--target", "http://h:99999", "--workload", str(wl),
                       "--duration", "1", "--out", str(tmp_path / "run")])
    assert code == 2
    _one_line(err, "--target", "port")


@pytest.mark.parametrize("command", ["run", "compare"])
def test_stall_limits_are_flags_with_their_defaults_in_help(command: str) -> None:
    sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices
               and command in a.choices).choices[command]
    text = sub.format_help()
    assert "--ttft-timeout" in text and "--itl-timeout" in text
    assert "(default: 600.0)" in text and "(default: 120.0)" in text


@pytest.mark.sim
def test_itl_timeout_reaches_the_client(sim: str, wl: Path, tmp_path: Path) -> None:
    """A run with a tiny --itl-timeout against a slow simulator records timeout_itl."""
    out = tmp_path / "run"
    with SimServerProcess("small", time_scale=0.05) as slow:
        code, err = _run(slow.url, wl, out, "--itl-timeout", "0.05", "--ttft-timeout", "30")
    assert code in (0, 3), err
    from tests.support.runs import records

    kinds = {r.error_kind for r in records(out)}
    assert "timeout_itl" in kinds, kinds
    shutil.rmtree(out)


@pytest.mark.sim
@pytest.mark.parametrize(("a", "b"), [("Auto", "auto"), ("fp8", "FP8")])
def test_arm_labels_sharing_a_directory_are_refused_before_any_load(
        wl: Path, tmp_path: Path, a: str, b: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    code, err = _call(["compare", "--arm", f"{a}={dead}", "--arm", f"{b}={dead}",
                       "--workload", str(wl), "--duration", "1", "--out",
                       str(tmp_path / "cmp"), "--quiet"])
    assert code == 2
    _one_line(err, "--arm", repr(a), repr(b))
    assert "cannot reach" not in err


@pytest.mark.sim
@pytest.mark.parametrize("command", ["compare", "demo"])
def test_compare_and_demo_refuse_an_out_that_is_a_file(wl: Path, tmp_path: Path,
                                                       command: str) -> None:
    a_file = tmp_path / "f.txt"
    a_file.write_text("keep me")
    dead = f"http://127.0.0.1:{free_port()}"
    argv = (["compare", "--arm", f"a={dead}", "--arm", f"b={dead}", "--workload", str(wl),
             "--duration", "1"] if command == "compare" else ["demo", "--quick"])
    code, err = _call([*argv, "--out", str(a_file), "--quiet"])
    assert code == 2
    _one_line(err, "--out", str(a_file))
    assert a_file.read_text() == "keep me"


@pytest.fixture(scope="module")
def a_run(sim: str, wl: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("arun") / "run"
    code, err = _run(sim, wl, out)
    assert code in (0, 3), err
    return out


def _report(run: Path, *extra: str) -> tuple[int, str]:
    return _call(["report", str(run), "--no-charts", *extra])


@pytest.mark.parametrize("name", ["report.html", "x.html"])
def test_report_elsewhere_writes_only_its_own_names(a_run: Path, tmp_path: Path,
                                                    name: str) -> None:
    other = tmp_path / "other"
    shutil.copytree(a_run, other)  # another run's directory, with its own files
    (other / "summary.json").write_text("theirs")
    (other / "requests.csv").write_text("theirs")
    before = _digest(other)
    code, err = _report(a_run, "-o", str(other / name))
    assert code in (0, 3), err
    stem = Path(name).stem
    after = _digest(other)
    new = set(after) - set(before)
    assert new == {name, f"{stem}.summary.json", f"{stem}.requests.csv", f"{stem}.levels.csv",
                   f"{stem}.summary.schema.json"}, new
    assert all(after[k] == v for k, v in before.items())  # nothing of theirs replaced


def test_report_beside_its_run_keeps_the_plain_names(a_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(a_run, run)
    code, err = _report(run)
    assert code in (0, 3), err
    assert {"report.html", "summary.json", "requests.csv"} <= {p.name for p in run.iterdir()}


@pytest.mark.parametrize("name", ["run.json", "requests.jsonl"])
def test_report_never_takes_a_result_files_name(a_run: Path, tmp_path: Path,
                                                name: str) -> None:
    code, err = _report(a_run, "-o", str(tmp_path / name))
    assert code == 2
    _one_line(err, "-o", name)
    assert not (tmp_path / name).exists()


def test_history_companion_never_replaces_a_manifest(a_run: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(a_run, other)
    before = _digest(other)
    code, err = _call(["report", str(a_run), str(other), "--no-charts",
                       "-o", str(other / "run.html")])  # its data file would be run.json
    assert code == 2
    _one_line(err, "-o", "run.json")
    assert _digest(other) == before


@pytest.mark.sim
@pytest.mark.parametrize(("key", "value", "flag"), [
    ("vocab_size", 0, "--vocab-size"), ("vocab_size", -5, "--vocab-size"),
    ("vocab_size", 1.5, "--vocab-size"), ("vocab_size", 10**15, "--vocab-size"),
    ("block_size", 0, "--server-block-size"), ("block_size", -1, "--server-block-size"),
])
def test_impossible_server_info_sizes_are_one_line(wl: Path, tmp_path: Path, key: str,
                                                   value: object, flag: str) -> None:
    from tests.reliability.hostile_server import serving

    config: dict[str, dict[str, object]] = {"model_config": {"vocab_size": 1000},
                                            "cache_config": {"block_size": 16}}
    config["model_config" if key == "vocab_size" else "cache_config"][key] = value
    info = {"vllm_config": config}
    with serving("double_count", server_info=info) as srv:
        code, err = _call(["run", "--target", srv.url, "--workload", str(wl), "--duration",
                           "0.5", "--out", str(tmp_path / "run"), "--quiet"])
        asked = list(srv.seen)
    assert code == 2
    _one_line(err, "/server_info", key, flag)
    assert asked == []  # refused before any load
