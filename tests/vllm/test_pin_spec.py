"""Pinning asked for on the command line: CPU lists parsed or refused in one line,
and a pinned spec's environment binds a CPU server's OpenMP threads inside the set."""

from __future__ import annotations

import os

import pytest

from replay.errors import ConfigError
from replay.servers.launch import build_env, parse_cpus, plan_arms

CORES = sorted(os.sched_getaffinity(0))


def test_cpu_lists_parse_to_sorted_ids() -> None:
    assert parse_cpus(str(CORES[0]), "--pin-server") == (CORES[0],)
    text = f"{CORES[-1]},{CORES[0]}-{CORES[0]}"
    assert parse_cpus(text, "--pin-server") == tuple(sorted({CORES[0], CORES[-1]}))


@pytest.mark.parametrize("text", ["", "a", "1-", "3-1", "-1", "0,,1"])
def test_bad_cpu_list_is_one_line_naming_the_flag(text: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_cpus(text, "--pin-client")
    assert str(exc.value).startswith("--pin-client ") and "\n" not in str(exc.value)


def test_cpu_this_process_may_not_use_is_refused() -> None:
    missing = max(CORES) + 1
    with pytest.raises(ConfigError, match=f"CPU {missing} is not one this process may use"):
        parse_cpus(f"{CORES[0]},{missing}", "--pin-server")


def test_pinned_spec_binds_openmp_inside_the_set_unless_the_caller_chose() -> None:
    (spec,) = plan_arms("m", ["auto"], launcher=("python",), cpus=(CORES[-1],))
    assert build_env(spec, {})["VLLM_CPU_OMP_THREADS_BIND"] == str(CORES[-1])
    (own,) = plan_arms("m", ["auto"], launcher=("python",), cpus=(CORES[-1],),
                       env={"VLLM_CPU_OMP_THREADS_BIND": "nobind"})
    assert build_env(own, {})["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
    (free,) = plan_arms("m", ["auto"], launcher=("python",))
    assert "VLLM_CPU_OMP_THREADS_BIND" not in build_env(free, {})
