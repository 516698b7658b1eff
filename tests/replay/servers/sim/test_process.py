"""The subprocess wrapper and the ``serve-sim`` command."""

from __future__ import annotations

import json
import urllib.request

import orjson
import pytest

from replay.cli import main
from replay.errors import TargetError
from replay.servers.sim import SimServerProcess


def _get(url: str) -> tuple[int, dict[str, str], bytes]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, dict(r.headers), r.read()


@pytest.mark.sim
def test_process_serves_and_always_stops(tmp_path) -> None:
    truth = tmp_path / "t.jsonl"
    with SimServerProcess("small", "auto", time_scale=50.0, truth_path=str(truth)) as srv:
        status, headers, raw = _get(srv.url + "/server_info?config_format=json")
        info = json.loads(raw)
        assert status == 200 and headers["X-Simulated"] == "agentreplay"
        assert info["vllm_config"]["additional_config"] == {"decode_backend": "auto"}
        assert info["time_scale"] == 50.0
        req = urllib.request.Request(
            srv.url + "/v1/completions", method="POST",
            data=orjson.dumps({"prompt": [20, 21], "max_tokens": 3}),
            headers={"Content-Type": "application/json", "X-Request-Id": "p1"})
        with urllib.request.urlopen(req, timeout=5) as r:
            assert json.loads(r.read())["usage"]["completion_tokens"] == 3
        proc = srv.proc
    assert proc is not None and proc.poll() is not None
    (line,) = truth.read_bytes().splitlines()
    assert orjson.loads(line)["request_id"] == "p1"


@pytest.mark.sim
def test_process_reports_a_bad_profile() -> None:
    with pytest.raises(TargetError, match="unknown sim profile"):
        with SimServerProcess("no-such-profile"):
            pass


@pytest.mark.parametrize("argv,words", [
    (["--profile", "missing"], "unknown sim profile"),
    (["--faults", "stall_rate=2"], "stall_rate"),
    (["--speedup", "0"], "--speedup"),
    (["--time-scale", "0"], "--speedup"),  # the former name, still read
    (["--profile", "/nonexistent/p.json"], "cannot read profile"),
])
@pytest.mark.sim
def test_cli_user_errors_exit_2(argv, words, capsys) -> None:
    assert main(["serve-sim", *argv]) == 2
    assert words in capsys.readouterr().err


def test_profile_file_errors_name_the_field(tmp_path, capsys) -> None:
    path = tmp_path / "p.json"
    path.write_text('{"name": "x", "model": "m", "max_model_len": -1}')
    assert main(["serve-sim", "--profile", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "max_model_len" in err


def test_serve_sim_flags_are_the_sim_config_knobs() -> None:
    """Every SimConfig knob is a serve-sim flag and reaches the config under its field
    (``--speedup`` is ``time_scale``); the command's defaults (port 8000, the demo's
    profile) differ from a SimConfig built in code (a free port, 'small')."""
    from replay.cli import build_parser
    from replay.knobs import from_knobs, knob_values, knobs
    from replay.servers.sim import SERVE_SIM_PROFILE, SimConfig

    parser = build_parser()
    args = parser.parse_args(["serve-sim", "--speedup", "3", "--port", "0", "--split-tokens",
                              "--truth", "t.jsonl", "--backend", "auto", "--seed", "7"])
    c = from_knobs(SimConfig, knob_values(args, SimConfig))
    assert (c.time_scale, c.port, c.split_tokens, c.truth_path, c.backend, c.seed) == \
        (3.0, 0, True, "t.jsonl", "auto", 7)
    plain = from_knobs(SimConfig, knob_values(parser.parse_args(["serve-sim"]), SimConfig))
    assert (plain.port, plain.profile) == (8000, SERVE_SIM_PROFILE)
    assert (SimConfig().port, SimConfig().profile) == (0, "small")
    assert {k.flag for _n, _i, k in knobs(SimConfig)} == {
        "--profile", "--backend", "--host", "--port", "--speedup", "--slowdown", "--truth",
        "--seed", "--split-tokens"}
