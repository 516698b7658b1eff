"""``compare --search`` as a command: limits refused naming the flag, running out of
probes is an answer (exit 0), and a rerun into the same --out with other servers or
settings is refused instead of reusing the old probes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from replay.cli import main
from tests.support.servers import sims

# A floor every request meets, however starved the machine (the simulator's slowest
# 1-user answer is far above 1 tok/s; one cut by the drain while on pace for it is no
# failure): the 1-user probe is "meets", or "indeterminate" when 1.5 s held too few
# requests to tell, never "fails". At 30 tok/s a starved simulator's slow answers
# could fail it, and the search would end on a bracket instead of the probe limit.
_FLOOR = 1


def _args(urls: list[str], workload: Path, out: Path, *extra: str) -> list[str]:
    return ["compare", "--arm", f"auto={urls[0]}", "--arm", f"latency_specialized={urls[1]}",
            "--workload", str(workload), "--users", "1", "--duration", "1.5",
            "--warmup", "0.2", "--drain", "0.5", "--out", str(out), "--search", f"{_FLOOR}:15",
            "--quiet", *extra]


@pytest.mark.parametrize("flag, value", [
    ("--search-max-probes", "0"), ("--search-max-users", "-1"),
    ("--search-max-users", "0"), ("--search-precision", "0"),
])
def test_search_limits_are_refused_naming_the_flag(
        flag: str, value: str, tiny_workload: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s"
    urls = ["http://127.0.0.1:9", "http://127.0.0.1:9"]  # never asked
    assert main(_args(urls, tiny_workload, out, flag, value)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{flag}: must be" in err, err
    assert f"(got {float(value):g}" in err.replace(".0)", ")"), err
    assert not out.exists()  # refused before anything is written


@pytest.mark.sim
def test_probe_limit_answers_and_reruns_with_other_settings_are_refused(
        tiny_workload: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s"
    with sims(("small", "auto"), ("small", "latency_specialized")) as urls:
        rc = main(_args(urls, tiny_workload, out, "--search-max-probes", "1"))
        seen = capsys.readouterr()
        printed = seen.out
        # the search ends on its validity line (then its reasons), as run and compare do
        tail = seen.err[seen.err.rindex("agentreplay: "):].splitlines()
        assert tail[0].startswith("agentreplay: [SIMULATED] search "), seen.err
        assert all(line.startswith("  ") for line in tail[1:]), seen.err
        data = orjson.loads((out / "search.json").read_bytes())
        ended = {r["arm"]: r["ended"] for r in data["results"]}
        # a starved machine may stamp the probe invalid: then (and only then) exit 3
        assert rc == (3 if "invalid" in ended.values() else 0), (rc, data["results"])
        for r in data["results"]:
            if r["ended"] == "probe limit":  # one probe at 1 user, none left for more
                verdict = r["evidence"][0]["verdict"]  # 1.5 s may hold too few requests
                if verdict == "meets":
                    assert r["answer"] == "at least 1 user" and r["bracket"] == [1, None]
                else:  # indeterminate: no end of the bracket, said so
                    assert verdict == "indeterminate", r
                    assert r["answer"].startswith("unknown; indeterminate at 1")
                    assert r["bracket"] == [None, None] and r["indeterminate"] == [1]
                assert "--search-max-probes" in r["how"]
                assert f"{r['answer']} (stopped after 1 probe" in printed
        state = orjson.loads((out / "search-state.json").read_bytes())
        assert sorted(state["runs"]) == ["auto-u1-r0", "latency_specialized-u1-r0"]
        first = {p.name: (p / "run.json").read_bytes() for p in (out / "runs").iterdir()}

        # other --duration: refused, nothing rerun
        assert main(_args(urls, tiny_workload, out, "--duration", "2")) == 2
        err = capsys.readouterr().err
        assert "cannot resume with different settings" in err and "duration_s" in err
        # other servers (the arms' URLs swapped): refused
        assert main(_args(urls[::-1], tiny_workload, out)) == 2
        err = capsys.readouterr().err
        assert "cannot resume with different settings" in err and "urls" in err
        assert {p.name: (p / "run.json").read_bytes()
                for p in (out / "runs").iterdir()} == first
        # the same command with more probes resumes: the old probes are reused
        rc = main(_args(urls, tiny_workload, out, "--search-max-probes", "2",
                        "--search-max-users", "2"))
        assert rc in (0, 3)
        for name, manifest in first.items():
            # reused, unless a starved machine stamped it invalid: a spoiled probe is redone
            spoiled = (orjson.loads(manifest).get("validity") or {}).get("verdict") == "invalid"
            kept = (out / "runs" / name / "run.json").read_bytes() == manifest
            assert kept != spoiled, (name, spoiled)
