"""A bootstrap draw whose fit is no valid twin (a prefill rate the draw does not pin
down, 1e17 tokens/s past the profile's 1e12) is drawn again, never predicted with:
``calibrate --holdout`` died with a pydantic ValidationError traceback on such a refit."""

from __future__ import annotations

from typing import Any

import pytest

from replay.servers.sim import load_profile
from replay.twin import _refit


def test_refits_that_are_no_valid_profile_are_drawn_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_refit, "resample", lambda s, t, rng: (s, t))
    good = load_profile("small").model_dump(mode="json")
    calls: list[int] = []

    def to_profile(_: Any) -> dict[str, Any]:
        calls.append(1)
        bad = len(calls) % 2 == 1  # every other draw unpinned
        return dict(good, prefill_tokens_per_s=1e17) if bad else dict(good)

    out = _refit.refit_profiles(None, None, lambda s, t: None, to_profile,  # type: ignore[arg-type]
                                n=3)
    assert len(out) == 3 and all(p["prefill_tokens_per_s"] == good["prefill_tokens_per_s"]
                                 for p in out)
    assert len(calls) == 6
