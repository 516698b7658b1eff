"""``generate`` and ``generate_trace`` take one declaration of their parameters
(``GenerateParams``): the same arguments, the same defaults, the same workload."""

from __future__ import annotations

import inspect

import pytest

from traces import canonical_session_json, generate, generate_trace
from traces.generate._generate import GenerateParams


def test_both_entry_points_have_the_params_signature() -> None:
    want = inspect.signature(GenerateParams).parameters
    assert inspect.signature(generate).parameters == want
    assert inspect.signature(generate_trace).parameters == want
    assert list(want)[:3] == ["profile", "sessions", "seed"]


def test_both_draw_the_same_sessions() -> None:
    kw = dict(sessions=3, seed=7, max_context=8192, block_size=16)
    header, sessions = generate("coding-agent", **kw)  # type: ignore[arg-type]
    trace = generate_trace("coding-agent", **kw)  # type: ignore[arg-type]
    assert header == trace.base_header
    assert [canonical_session_json(s) for s in sessions] == \
        [canonical_session_json(s) for s in trace.sessions]


def test_an_unknown_parameter_is_refused() -> None:
    with pytest.raises(TypeError, match="sesions"):
        generate("coding-agent", sesions=3)  # type: ignore[call-arg]


def test_a_negative_seed_is_one_error_naming_the_seed() -> None:
    """Found by the command fuzzer: numpy refused a negative seed with its traceback."""
    from traces import TraceError, generate_trace

    with pytest.raises(TraceError) as err:
        generate_trace("coding-agent", sessions=2, seed=-1)
    assert err.value.field == "seed"
