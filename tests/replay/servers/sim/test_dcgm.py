"""The simulator's modelled DCGM exporter: its power model, labels and energy counter."""

from __future__ import annotations

import pytest

from replay.client import parse_dcgm
from replay.servers.sim import PowerMeter, StepTruth, load_profile, modelled_energy_j


def test_power_follows_the_engine_busy_share_per_gpu() -> None:
    profile = load_profile("small").model_copy(update={
        "idle_power_w": 100.0, "busy_power_w": 500.0, "tensor_parallel_size": 2})
    meter = PowerMeter(profile, busy_s=0.0)
    t0 = meter._last_ns
    text = meter.render(busy_s=0.25, now_ns=t0 + 1_000_000_000)  # busy 25% of 1 s
    assert text.count('DCGM_FI_DEV_POWER_USAGE{gpu="') == 2
    assert 'gpu="1",UUID="GPU-sim-0001",device="nvidia1"' in text
    sample = parse_dcgm(text)
    assert sample["gpus"] == 2
    assert sample["power_w"] == pytest.approx(2 * (100 + 400 * 0.25))
    assert sample["gpu_util_pct"] == 25
    assert sample["fb_used_mib"] == pytest.approx(2 * round(0.9 * profile.gpu_memory_mib))
    # the next second idle: the share is of the time since the scrape before
    again = parse_dcgm(meter.render(busy_s=0.25, now_ns=t0 + 2_000_000_000))
    assert again["power_w"] == pytest.approx(200.0)
    assert again["energy_mj"] == pytest.approx(1000 * 2 * (100 * 2 + 400 * 0.25), rel=1e-6)


def test_modelled_energy_integrates_the_step_log() -> None:
    profile = load_profile("small").model_copy(update={"idle_power_w": 100.0,
                                                        "busy_power_w": 300.0})
    s = 1_000_000_000
    steps = [StepTruth(index=i, start_ns=0, end_ns=end, model_s=0.5, actual_s=0.5,
                       decode_batch=1, ctx_tokens=0, prefill_tokens=0, emitted_tokens=1)
             for i, end in enumerate((2 * s, 4 * s))]
    # [1 s, 3.75 s]: idle 2.75 s; busy (1.5, 2] and (3.5, 3.75] = 0.75 s
    assert modelled_energy_j(profile, steps, s, int(3.75 * s)) == pytest.approx(
        100 * 2.75 + 200 * 0.75)


def test_missing_fields_are_absent_not_zero() -> None:
    assert parse_dcgm("# nothing\nvllm:foo 1\n") == {}
    only_util = parse_dcgm('DCGM_FI_DEV_GPU_UTIL{gpu="0"} 40\nDCGM_FI_DEV_GPU_UTIL{gpu="1"} 60\n')
    assert only_util == {"gpu_util_pct": 50.0}


def test_profiles_reject_busy_below_idle() -> None:
    data = load_profile("small").model_dump()
    data.update(idle_power_w=500.0, busy_power_w=100.0)
    with pytest.raises(ValueError, match="busy_power_w"):
        type(load_profile("small")).model_validate(data)


def test_busy_time_beyond_an_interval_is_carried_not_dropped() -> None:
    """A long step delivered just after a scrape brings more busy time than the next
    interval holds: the excess shows in the interval after, so energy is kept."""
    meter = PowerMeter(load_profile("small"), busy_s=0.0)
    t0 = meter._last_ns
    s = 1_000_000_000
    assert meter.utilisation(t0 + s, busy_s=1.5) == 1.0
    assert meter.utilisation(t0 + 2 * s, busy_s=1.5) == pytest.approx(0.5)
    assert meter.utilisation(t0 + 3 * s, busy_s=1.5) == 0.0
