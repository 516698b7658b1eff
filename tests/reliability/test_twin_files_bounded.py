"""A twin file holds finite, bounded figures, and ``plan --twin`` bounds its work before
simulating: absurd numbers are one line naming the field or flag (exit 2), never a
wrong table, a traceback, a MemoryError or a plan that never ends.

Before: step times of 1e10 s printed 1e+09 tok/s/user (the nanosecond step overflowed
to 1 ns); ``Infinity`` steps or a NaN noise quantile raised "cannot convert float NaN
to integer"; 1e12 KV blocks (copied by ``calibrate`` from a server's report) was a
MemoryError; ``--users 10000000`` and ``--seed -1`` were pydantic tracebacks; a
zero-step twin with a decode workload never ended.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from replay.cli import main
from replay.errors import ConfigError
from replay.servers.sim import MAX_GPU_BLOCKS, load_profile, server_info
from replay.twin import Deadlock, VirtualLoop
from tests.analysis.builders import make_run
from tests.replay.conftest import make_workload
from tests.support.fit import PROFILE, engine_records


@pytest.fixture
def wl(tmp_path: Path) -> Path:
    return make_workload(tmp_path / "wl.jsonl", sessions=4, turns=4, new_blocks=4,
                         output=20, think_s=1.0)


def _twin(tmp_path: Path, edit: Any = None, base: str = "small") -> Path:
    data = json.loads(load_profile(base).model_dump_json())
    if edit is not None:
        edit(data)
    path = tmp_path / "twin.json"
    path.write_text(json.dumps(data))  # Python's json writes Infinity and NaN as given
    return path


def _plan(*extra: str) -> list[str]:
    return ["plan", "--duration", "20", "--warmup", "2", "--drain", "2", "--jobs", "1",
            *extra]


def _one_line(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]


def _set(path: tuple[str, ...], value: object) -> Any:
    def edit(d: dict[str, Any]) -> None:
        for key in path[:-1]:
            d = d[key]
        d[path[-1]] = value
    return edit


BAD_FIELDS = [
    (("backends", "latency_specialized", "step_s_batch1"), 1e10,
     "backends.latency_specialized.step_s_batch1"),
    (("backends", "auto", "step_s_batch64"), float("inf"), "backends.auto.step_s_batch64"),
    (("backends", "auto", "step_s_batch1"), float("nan"), "backends.auto.step_s_batch1"),
    (("step_noise",), [0.9, float("nan"), 1.2], "step_noise.1"),
    (("step_noise",), [0.9, float("inf")], "step_noise.1"),
    (("num_gpu_blocks",), 10**12, "num_gpu_blocks"),
    (("max_num_seqs",), 10**9, "max_num_seqs"),
    (("prefill_tokens_per_s",), float("inf"), "prefill_tokens_per_s"),
    (("request_overhead_s",), float("nan"), "request_overhead_s"),
]


@pytest.mark.parametrize(("path", "value", "field"), BAD_FIELDS)
def test_absurd_twin_field_is_one_line_before_any_level(
    tmp_path: Path, wl: Path, path: tuple[str, ...], value: object, field: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    twin = _twin(tmp_path, _set(path, value))
    code = main(_plan("--twin", str(twin), "--workload", str(wl), "--users", "1:2",
                      "--levels", "2"))
    out, err = capsys.readouterr()
    _one_line(code, err, f"field {field}:", str(twin))
    assert "  level " not in err and "P90" not in out  # refused before any simulation


@pytest.mark.parametrize(("path", "value", "field"), BAD_FIELDS)
def test_serve_sim_profile_refuses_the_same_fields(
    tmp_path: Path, path: tuple[str, ...], value: object, field: str,
) -> None:
    twin = _twin(tmp_path, _set(path, value))
    with pytest.raises(ConfigError, match=f"field {field.replace('.', '[.]')}:"):
        load_profile(str(twin))


def _worst(edit: dict[str, Any]) -> Any:
    def apply(d: dict[str, Any]) -> None:
        d.update(edit)
        for b in d["backends"].values():
            b.update(edit.get("_steps", {}))
        d.pop("_steps", None)
    return apply


# each field within its own bounds, their product not: the twin's nanosecond clock
# overflowed (a prefill rate of 1e-300: "OverflowError: cannot convert float infinity
# to integer" after the header; a 1-token context reference: steps of 1e9 s)
WORST_STEPS = [
    ({"prefill_tokens_per_s": 1e-300}, "prefill_tokens_per_s 1e-300"),
    ({"prefill_tokens_per_s": 1e-3}, "prefill_tokens_per_s 0.001"),
    ({"ctx_ref_tokens": 1, "_steps": {"step_s_batch1": 60.0, "step_s_batch64": 60.0}},
     "ctx_ref_tokens 1"),
    ({"step_noise": [1.0, 1000.0], "ctx_ref_tokens": 10_000,
      "_steps": {"step_s_batch1": 60.0, "step_s_batch64": 60.0}}, "step_noise up to 1000x"),
    ({"max_num_seqs": 256, "_steps": {"step_s_batch1": 60.0, "step_s_batch64": 0.0}},
     "negative step at max_num_seqs 256"),
]


@pytest.mark.parametrize(("edit", "needle"), WORST_STEPS)
def test_a_twin_whose_longest_step_is_absurd_is_one_line(
    tmp_path: Path, wl: Path, edit: dict[str, Any], needle: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    twin = _twin(tmp_path, _worst(edit))
    with pytest.raises(ConfigError, match="past the|negative step"):
        load_profile(str(twin))  # serve-sim refuses it too
    code = main(_plan("--twin", str(twin), "--workload", str(wl), "--users", "1:2",
                      "--levels", "2"))
    out, err = capsys.readouterr()
    _one_line(code, err, needle, str(twin))
    assert "P90" not in out  # refused before any simulation


def test_a_slow_but_bounded_twin_still_plans(tmp_path: Path) -> None:
    """The bound is on the product, not a tighter bound on each field: minute-long steps
    with noise, a short context reference and a slow prefill stay a valid profile."""
    twin = _twin(tmp_path, _worst({"ctx_ref_tokens": 100_000, "prefill_tokens_per_s": 100.0,
                                   "step_noise": [0.5, 1.0, 4.0],
                                   "_steps": {"step_s_batch1": 1.0, "step_s_batch64": 60.0}}))
    load_profile(str(twin))


def test_bundled_profiles_stay_within_the_bounds() -> None:
    for name in ("small", "instant", "kimi-k3-gb300-tp16", "kimi-k3-gb300-tp16-dspark"):
        load_profile(name)  # raises on a field out of bounds


def test_calibrate_caps_a_servers_absurd_kv_blocks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """``calibrate`` copies the KV cache from the server's report: 1e12 blocks is capped
    (and said), so the twin it writes loads and plans (it was a MemoryError)."""
    info = server_info(PROFILE, "auto", 1.0)
    info["vllm_config"]["cache_config"]["num_gpu_blocks"] = 10**12
    dirs = [str(make_run(tmp_path / f"u{u}", engine_records(PROFILE, u, seed=u), label="auto",
                         model=PROFILE.model, simulated=True, server_info=info,
                         load={"users": u, "duration_s": 10, "warmup_s": 0, "drain_s": 5}))
            for u in (1, 2, 4)]
    twin = tmp_path / "twin.json"
    assert main(["calibrate", *dirs, "-o", str(twin)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"assumed: num_gpu_blocks={MAX_GPU_BLOCKS} (the server reported 1e+12" in out, out
    assert load_profile(str(twin)).num_gpu_blocks == MAX_GPU_BLOCKS


@pytest.mark.parametrize(("flags", "needle"), [
    (["--users", "10000000"], "--users:"),
    (["--users", "1:1000000"], "--users:"),
    (["--seed", "-1"], "--seed:"),
    (["--seed", "18446744073709551616"], "--seed:"),
    (["--levels", "1000000000"], "--levels:"),
    (["--replicas", "1000000"], "--replicas:"),
    (["--jobs", "100000"], "--jobs:"),
    # 8192 replicas x 1024 blocks: past the blocks one level may hold
    (["--replicas", "4096", "--users", "1"], None),
    # a million-step-a-second sweep: past the work limit (hours of CPU)
    (["--users", "1:100000", "--levels", "1000", "--duration", "86400"], "past the limit"),
])
def test_plan_flags_beyond_the_bounds_are_one_line(
    tmp_path: Path, wl: Path, flags: list[str], needle: str | None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    twin = _twin(tmp_path, _set(("num_gpu_blocks",), 4096) if "4096" in flags else None)
    code = main(_plan("--twin", str(twin), "--workload", str(wl), *flags))
    out, err = capsys.readouterr()
    _one_line(code, err, needle or "--replicas 4096")
    assert "  level " not in err  # refused before any level was simulated


def test_zero_step_twin_is_refused_before_simulating(
    tmp_path: Path, wl: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """The bundled ``instant`` profile steps in zero time: with a decode workload a
    level would never end (it grew a gigabyte a minute)."""
    twin = _twin(tmp_path, base="instant")
    code = main(_plan("--twin", str(twin), "--workload", str(wl), "--users", "1",
                      "--levels", "1"))
    _, err = capsys.readouterr()
    _one_line(code, err, "step_s_batch1 is 0", "never advances")


def test_virtual_clock_refuses_to_creep() -> None:
    """An advancer that moves time a nanosecond a wait (zero-time steps, rounded up)
    would take 1e10 waits to cover 10 s: the loop stops with Deadlock instead."""
    waits = []

    def creep(now: int, until: int | None) -> int:
        waits.append(now)
        return now + 1 if until is None or until > now + 1 else until

    async def ten_seconds() -> None:
        for _ in range(10**9):
            await asyncio.sleep(1e-9)  # a timer each time: every wait is a timed one

    loop = VirtualLoop(creep)
    try:
        with pytest.raises(Deadlock, match="simulated time does not advance"):
            loop.run_until_complete(asyncio.wait_for(ten_seconds(), 10.0))
    finally:
        loop.close()
    assert len(waits) < 10**6  # it gave up early, not after the billion


def test_virtual_clock_keeps_going_when_time_moves() -> None:
    """Many waits are fine while each moves simulated time on (a millisecond step)."""
    from replay.twin._clock import MAX_STILL_WAITS

    assert MAX_STILL_WAITS < 25_000
    def step(now: int, until: int | None) -> int:
        return now + 1_000_000 if until is None else min(until, now + 1_000_000)

    async def many() -> float:
        for _ in range(25_000):  # past MAX_STILL_WAITS (20,000) in one window
            await asyncio.sleep(0.001)
        return asyncio.get_running_loop().time()

    loop = VirtualLoop(step)
    try:
        assert loop.run_until_complete(many()) >= 25.0  # every sleep took its millisecond
    finally:
        loop.close()


@pytest.mark.parametrize("command", ["plan", "report"])
@pytest.mark.parametrize("seed", ["-1", "18446744073709551616"])
def test_seed_out_of_range_is_one_line_for_measured_runs(
    tmp_path: Path, command: str, seed: str, capsys: pytest.CaptureFixture[str],
) -> None:
    """The bootstrap seed of ``plan DIR`` / ``report DIR``: numpy's ValueError traceback
    for -1, before."""
    run = make_run(tmp_path / "r", engine_records(PROFILE, 2, seed=2), label="auto",
                   model=PROFILE.model, simulated=True,
                   load={"users": 2, "duration_s": 10, "warmup_s": 0, "drain_s": 5})
    code = main([command, str(run), "--seed", seed])
    _one_line(code, capsys.readouterr().err, "--seed:", seed)


def _interval() -> dict[str, Any]:
    from replay.twin import PredictionInterval
    from replay.twin._interval import current_rule

    return PredictionInterval(
        checked_users=2, max_measured_users=2, max_request_tokens=4000,
        miss={"p90_interactivity": 0.03, "p90_ttft_s": 0.2, "output_tok_s": 0.01},
        spread={"p90_interactivity": 0.02, "p90_ttft_s": 0.1, "output_tok_s": 0.01},
        requests=200, z=1.9, refits=5, **current_rule()).as_dict()


def _with_interval(path: tuple[str, ...], value: object) -> Any:
    def edit(d: dict[str, Any]) -> None:
        d["calibration"] = {"interval": _interval()}
        _set(("calibration", "interval", *path), value)(d)
    return edit


BAD_INTERVAL = [
    (("miss", "p90_ttft_s"), "abc", "calibration.interval.miss.p90_ttft_s"),
    (("spread", "p90_interactivity"), 1e300, "calibration.interval.spread.p90_interactivity"),
    (("scale", "4x", "p90_ttft_s"), -1.0, "calibration.interval.scale.4x.p90_ttft_s"),
    (("scale", "what-if"), 2.0, "calibration.interval.scale"),
    (("z",), float("inf"), "calibration.interval.z"),
    (("checked_users",), 0, "calibration.interval.checked_users"),
    (("growth_by_metric",), [1, 2], "calibration.interval.growth_by_metric"),
]


@pytest.mark.parametrize(("path", "value", "field"), BAD_INTERVAL)
def test_a_damaged_prediction_interval_is_one_line_before_any_level(
    tmp_path: Path, wl: Path, path: tuple[str, ...], value: object, field: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: a hand-edited interval (a string for a miss) was a TypeError traceback
    mid-plan, and a scale of "abc" one only at a level far enough to read it."""
    twin = _twin(tmp_path, _with_interval(path, value))
    code = main(_plan("--twin", str(twin), "--workload", str(wl), "--users", "1:2",
                      "--levels", "2"))
    out, err = capsys.readouterr()
    _one_line(code, err, f"field {field}:", str(twin))
    assert "  level " not in err and "P90" not in out


def test_the_undamaged_interval_plans_and_its_width_stays_finite(
    tmp_path: Path, wl: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    import math

    from replay.twin import PredictionInterval
    from replay.twin._interval import MAX_HALF_WIDTH

    twin = _twin(tmp_path, _with_interval(("miss", "p90_ttft_s"), 0.2))
    code = main(_plan("--twin", str(twin), "--workload", str(wl), "--users", "1:2",
                      "--levels", "2"))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "prediction interval" in out
    # the largest figures the file may hold, far out: a capped width, finite bounds
    wide = PredictionInterval(**(_interval() | {"miss": {"p90_ttft_s": 50.0}, "growth": 50.0,
                                                "growth_by_metric": {}}))
    assert wide.half_width("p90_ttft_s", 100_000) == MAX_HALF_WIDTH
    lo, hi = wide.bounds("p90_ttft_s", 1.0, 100_000)
    assert 0.0 < lo < 1.0 < hi and math.isfinite(hi)
