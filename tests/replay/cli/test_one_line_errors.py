"""Every command's bad flag values: one line on stderr naming the flag (no usage dump),
exit 2; a misspelt flag names the closest flag of that command; a server URL without
an http(s) scheme says what to write."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from replay.cli import main
from tests.analysis.builders import make_run, rec
from tests.support.commands import call, commands

W, R, OUT = "{workload}", "{rundir}", "{out}"
_RUN = ["run", "--target", "http://127.0.0.1:9", "--workload", W, "--out", OUT,
        "--duration", "1"]
_CMP = ["compare", "--arm", "a=http://127.0.0.1:9", "--arm", "b=http://127.0.0.1:8",
        "--workload", W, "--out", OUT, "--duration", "1"]

CASES: list[tuple[str, list[str], str]] = [
    # (case id, argv, what the line must hold)
    ("run-api", [*_RUN, "--api", "chatt"], "--api 'chatt': choose one of completions, chat"),
    ("run-duration", [*_RUN, "--duration", "10s"], "--duration '10s': give a number"),
    ("run-users", [*_RUN, "--users", "many"], "--users"),
    ("run-target-no-scheme", ["run", "--target", "127.0.0.1:8101", "--workload", W, "--out", OUT,
                              "--duration", "1"], "write http://127.0.0.1:8101"),
    ("run-typo", [*_RUN, "--durations", "10"], "did you mean --duration?"),
    ("compare-duration", [*_CMP, "--duration", "10s"], "--duration '10s': give a number"),
    ("compare-repeats", [*_CMP, "--repeats", "x"], "--repeats 'x': give a whole number"),
    ("compare-api", [*_CMP, "--api", "chatt"], "--api 'chatt'"),
    ("compare-arm-no-scheme", ["compare", "--arm", "a=127.0.0.1:8101", "--arm",
                               "b=http://127.0.0.1:8", "--workload", W, "--out", OUT,
                               "--duration", "1"], "--arm a: '127.0.0.1:8101' is not an "
                                                   "http(s) URL (no scheme): write "
                                                   "http://127.0.0.1:8101"),
    ("compare-arm-bad-scheme", ["compare", "--arm", "a=htp://host:1", "--arm",
                                "b=http://127.0.0.1:8", "--workload", W, "--out", OUT,
                                "--duration", "1"], "write http://host:1"),
    ("compare-slo", [*_CMP, "--slo", "100"], "--slo '100': give FLOOR:TTFT"),
    ("compare-typo", [*_CMP, "--durations", "10"], "agentreplay compare: error: unrecognized "
                                                   "argument --durations (did you mean "
                                                   "--duration?)"),
    ("plan-slo", ["plan", R, "--slo", "100"], "--slo '100': give FLOOR:TTFT"),
    ("plan-seed", ["plan", R, "--seed", "x"], "--seed 'x': give a whole number"),
    ("plan-share", ["plan", R, "--max-failure-share", "2"], "--max-failure-share"),
    ("plan-typo", ["plan", R, "--sloo", "100:5"], "did you mean --slo?"),
    ("report-slo", ["report", R, "--slo", "100"], "--slo '100': give FLOOR:TTFT"),
    ("report-seed", ["report", R, "--seed", "1.5"], "--seed '1.5'"),
    ("report-typo", ["report", R, "--no-chrts"], "did you mean --no-charts?"),
    ("calibrate-typo", ["calibrate", R, "--holdot", "1"], "did you mean --holdout?"),
    ("demo-typo", ["demo", "--quik"], "agentreplay demo: error: unrecognized argument --quik "
                                      "(did you mean --quick?)"),
    ("launch-port", ["launch", "--model", "m", "--port", "x"], "--port 'x'"),
    ("launch-mode", ["launch", "--model", "m", "--mode", "both"], "--mode 'both': choose one of"),
    ("serve-sim-port", ["serve-sim", "--port", "x"], "--port 'x'"),
    ("serve-sim-backend", ["serve-sim", "--backend", "fast"], "--backend 'fast'"),
    ("serve-sim-speedup", ["serve-sim", "--speedup", "x"], "--speedup 'x'"),
    ("traces-sessions", ["traces", "generate", "--output", OUT, "--sessions", "x"],
     "--sessions 'x': give a whole number"),
    ("traces-action", ["traces", "generat"], "ACTION 'generat': choose one of"),
    ("no-command", ["bogus"], "COMMAND 'bogus': choose one of"),
]


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from traces import generate, write_workload

    root = tmp_path_factory.mktemp("bad")
    wl = root / "wl.jsonl"
    header, sessions = generate("coding-agent", sessions=2, seed=1, block_size=16,
                                max_context=4096, prompt_scale=0.02)
    write_workload(wl, header, sessions)
    run = make_run(root / "run", [rec(i) for i in range(5)])
    return {"workload": str(wl), "rundir": str(run), "out": str(root / "out")}


@pytest.mark.parametrize(("argv", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_value_is_one_line_naming_the_flag(
        argv: list[str], want: str, paths: dict[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    args = [a.format(**paths) for a in argv]
    try:
        code = main(args)
    except SystemExit as exc:  # argparse exits from inside parse_args
        code = int(exc.code or 0)
    got = capsys.readouterr()
    lines = got.err.strip().splitlines()
    assert code == 2, got
    assert len(lines) == 1 and "usage:" not in got.err, got.err
    assert lines[0].startswith("agentreplay"), lines[0]
    assert want in lines[0], lines[0]
    assert not re.search(r"'([^']+)'.*\(got '\1'\)", lines[0]), lines[0]  # a value said once
    assert not Path(paths["out"]).exists()  # refused before anything is written


def _typed_options() -> list[tuple[str, str, str]]:
    """(command, flag, bad value) for every option of every command whose value the parser
    converts (a number or a choice): read off the parser, so a flag added later is covered."""
    out = []
    for name, parser in commands().items():
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0 or action.dest == "help":
                continue
            flag = action.option_strings[-1]
            if action.choices is not None:
                out.append((name, flag, "zz-not-a-choice"))
            elif action.type in (int, float):
                out.append((name, flag, "x1"))
    return out


TYPED = _typed_options()


def test_the_walk_covers_every_command_and_kind() -> None:
    """Every command with a typed option is walked, and ints, floats and choices each are."""
    named = {c for c, _, _ in TYPED}
    assert named >= set(commands()) - {"demo", "traces inspect", "traces validate",
                                       "calibrate"} and "calibrate" in named
    assert {v for _, _, v in TYPED} == {"zz-not-a-choice", "x1"}


@pytest.mark.parametrize(("command", "flag", "value"), TYPED,
                         ids=[f"{c}{f}" for c, f, _ in TYPED])
def test_every_typed_flag_refuses_a_bad_value_in_one_line(
        command: str, flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = call([*command.split(), flag, value])
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and "usage:" not in err, err
    assert lines[0].startswith(f"agentreplay {command}: error: {flag} '{value}': "), lines[0]


def _long_flags(command: str) -> list[str]:
    return [f for a in commands()[command]._actions for f in a.option_strings
            if f.startswith("--") and f != "--help"]


@pytest.mark.parametrize("command", [c for c in sorted(commands()) if _long_flags(c)])
def test_every_command_suggests_its_closest_flag(command: str) -> None:
    """Each command's longest flag, one letter dropped, is named back with the fix."""
    flag = max(_long_flags(command), key=len)
    typo = flag[:-2] + flag[-1]
    code, err = call([*command.split(), typo, "1"])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert f"unrecognized argument {typo} (did you mean {flag}?)" in lines[0], lines[0]


@pytest.mark.parametrize(("argv", "fix"), [
    (["demo", "-o", "x"], "--out"), (["report", "-x"], None), (["run", "-u", "4"], "--users"),
])
def test_an_unknown_short_flag_is_named(argv: list[str], fix: str | None) -> None:
    """``demo -o DIR`` (other commands take ``-o``) names ``-o`` and the long flag meant."""
    code, err = call(argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert f"unrecognized argument {argv[1]}" in lines[0], lines[0]
    assert (f"(did you mean {fix}?)" in lines[0]) if fix else "did you mean" not in lines[0]
