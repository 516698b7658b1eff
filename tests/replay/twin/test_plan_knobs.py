"""``plan --twin`` takes ``run``'s load knobs: the same flag, metavar and bounds (a value
``run`` refuses, the twin refuses under the same flag)."""

from __future__ import annotations

import pytest

from replay.errors import ConfigError
from replay.knobs import from_knobs, knobs
from replay.load import SharedSettings
from replay.load._settings import MAX_SCALE, MAX_SECONDS
from replay.twin import PlanSettings

SHARED = ("duration_s", "warmup_s", "drain_s", "think_scale", "think_time_cap_s")


@pytest.mark.parametrize("field", SHARED)
def test_the_twin_knob_is_the_shared_knob(field: str) -> None:
    plan = {name: (info, knob) for name, info, knob in knobs(PlanSettings)}
    shared = {name: (info, knob) for name, info, knob in knobs(SharedSettings)}
    (_, p_knob), (_, s_knob) = plan[field], shared[field]
    assert (p_knob.flag, p_knob.metavar) == (s_knob.flag, s_knob.metavar)
    assert p_knob.help.startswith("with --twin: ")


@pytest.mark.parametrize(("field", "value"), [
    ("duration_s", 0.0), ("duration_s", MAX_SECONDS * 2), ("warmup_s", -1.0),
    ("drain_s", -1.0), ("drain_s", MAX_SECONDS * 2), ("think_scale", -1.0),
    ("think_scale", MAX_SCALE * 2), ("think_time_cap_s", -5.0)])
def test_a_value_run_refuses_the_twin_refuses_naming_the_same_flag(
        field: str, value: float) -> None:
    flag = dict((n, k.flag) for n, _i, k in knobs(SharedSettings))[field]
    with pytest.raises(ConfigError, match=flag):
        from_knobs(SharedSettings, {"duration_s": 10.0, field: value})
    with pytest.raises(ConfigError, match=flag):
        from_knobs(PlanSettings, {"twin": "t.json", "workload": "w.jsonl", field: value})
