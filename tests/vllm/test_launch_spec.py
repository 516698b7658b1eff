"""Arm command lines: identical except for what each mode must set apart."""

from __future__ import annotations

import json
import shlex

import pytest

from replay.cli import main
from replay.errors import ConfigError
from replay.servers.launch._launcher import (
    API_SERVER_MODULE,
    LaunchMode,
    build_command,
    build_env,
    format_command,
    plan_arms,
    resolve_vllm_launcher,
)

PY = ("/opt/venv/bin/python", "-m", API_SERVER_MODULE)
BACKENDS = ["auto", "latency_specialized"]


def _diff_positions(a: list[str], b: list[str]) -> list[int]:
    assert len(a) == len(b)
    return [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]


def test_sequential_arms_differ_only_in_additional_config() -> None:
    specs = plan_arms(
        "org/model", BACKENDS, launcher=PY, port=8100,
        extra_args=["--max-num-seqs", "8", "--enforce-eager"], served_model_name="m",
    )
    a, b = (build_command(s) for s in specs)
    diff = _diff_positions(a, b)
    assert len(diff) == 1
    assert a[diff[0] - 1] == "--additional-config"
    assert [json.loads(c[diff[0]]) for c in (a, b)] == [{"decode_backend": x} for x in BACKENDS]
    assert build_env(specs[0], {}) == build_env(specs[1], {})
    assert a[: len(PY)] == list(PY)
    assert a[a.index("--port") + 1] == "8100"


def test_side_by_side_gets_disjoint_equal_gpu_sets_and_own_ports() -> None:
    specs = plan_arms(
        "org/model", BACKENDS, launcher=PY, port=9000,
        mode=LaunchMode.SIDE_BY_SIDE, gpus_per_arm=4, extra_args=["-tp", "4"],
    )
    a, b = (build_command(s) for s in specs)
    assert {a[i - 1] for i in _diff_positions(a, b)} == {"--port", "--additional-config"}
    assert [s.port for s in specs] == [9000, 9001]
    env_a, env_b = build_env(specs[0], {"X": "1"}), build_env(specs[1], {"X": "1"})
    assert {k for k in env_a if env_a[k] != env_b.get(k)} == {"CUDA_VISIBLE_DEVICES"}
    sets = [set(map(int, e["CUDA_VISIBLE_DEVICES"].split(","))) for e in (env_a, env_b)]
    assert not sets[0] & sets[1]
    assert len(sets[0]) == len(sets[1]) == 4
    assert env_a["VLLM_SERVER_DEV_MODE"] == "1"


def test_extra_additional_config_is_merged_not_duplicated() -> None:
    (spec,) = plan_arms(
        "m", ["auto"], launcher=PY, extra_args=["--additional-config", '{"k": 2}']
    )
    cmd = build_command(spec)
    assert cmd.count("--additional-config") == 1
    assert json.loads(cmd[cmd.index("--additional-config") + 1]) == {
        "decode_backend": "auto", "k": 2,
    }


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"extra_args": ["--port", "1"]}, "--port after --"),
        ({"extra_args": ["--additional-config", "[1]"]}, "JSON object"),
        ({"extra_args": ["--additional-config", '{"decode_backend": "x"}']}, "with --arm"),
        ({"mode": LaunchMode.SIDE_BY_SIDE}, "--gpus-per-arm"),
        ({"gpus_per_arm": 0}, "at least 1"),
        ({"port": 70000}, "not all valid"),
    ],
)
def test_bad_options_are_config_errors(kwargs: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        plan_arms("m", BACKENDS, launcher=PY, **kwargs)


def test_missing_local_model_dir_is_rejected_before_start(tmp_path) -> None:
    with pytest.raises(ConfigError, match="no such directory"):
        plan_arms(str(tmp_path / "nope"), BACKENDS, launcher=PY)


def test_vllm_on_path_runs_serve_with_positional_model(tmp_path, monkeypatch) -> None:
    exe = tmp_path / "vllm"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    launcher = resolve_vllm_launcher(None)
    assert launcher == (str(exe), "serve")
    (spec,) = plan_arms("org/m", ["auto"], launcher=launcher)
    assert build_command(spec)[:3] == [str(exe), "serve", "org/m"]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match="--vllm-python"):
        resolve_vllm_launcher(None)


def test_cli_dry_run_prints_one_runnable_line_per_arm(tmp_path, capsys) -> None:
    py = tmp_path / "python"
    py.write_text("")
    code = main([
        "launch", "--model", str(tmp_path), "--arm", "auto", "--arm", "latency_specialized",
        "--vllm-python", str(py), "--port", "8123", "--dry-run", "--", "--max-model-len", "64",
    ])
    assert code == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if not ln.startswith("#")]
    argvs = [shlex.split(ln) for ln in lines]
    assert len(argvs) == 2
    diff = _diff_positions(argvs[0], argvs[1])
    assert [argvs[0][i - 1] for i in diff] == ["--additional-config"]
    assert argvs[0][:4] == ["VLLM_SERVER_DEV_MODE=1", str(py), "-m", API_SERVER_MODULE]
    assert format_command(plan_arms(str(tmp_path), ["auto"], launcher=PY)[0]).startswith(
        "VLLM_SERVER_DEV_MODE=1 "
    )


def test_cli_user_error_exits_2(tmp_path, capsys) -> None:
    code = main([
        "launch", "--model", str(tmp_path / "missing"), "--arm", "auto",
        "--vllm-python", "/bin/sh", "--dry-run",
    ])
    assert code == 2
    err = capsys.readouterr().err
    assert "no such directory" in err
    assert "Traceback" not in err
