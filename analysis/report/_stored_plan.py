"""What the decision reads of a stored twin plan (``twin-plan.json``), checked: the file
is derived and may be hand-edited or damaged, and the decision does arithmetic on its
brackets, replica and GPU counts. A file that does not hold them as written by ``plan
--twin`` (or the demo) is left out of the decision; the report's twin section says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["usable_twin"]

_Count = Annotated[int, Field(ge=1, le=10**9)]
_Bound = Annotated[float | None, Field(ge=0, allow_inf_nan=False)]


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class _Tier(_Loose):
    tier: str
    bracket: Annotated[list[_Bound], Field(min_length=2, max_length=2)]
    text: str = "n/a"
    interval: str | None = None


class _Arm(_Loose):
    arm: str
    replicas: _Count | None = None
    tiers: list[_Tier] = []


class _Plan(_Loose):
    backend: str | None = None
    replicas: _Count | None = None
    gpus_per_replica: _Count | None = None
    arms: list[str] | None = None
    tiers: list[_Tier] = []
    twins: list[_Arm] | None = None


def usable_twin(data: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``data`` when the fields the decision reads hold what ``plan --twin`` writes,
    else None (the decision then shows the measured brackets alone)."""
    if data is None:
        return None
    try:
        _Plan.model_validate(dict(data))
    except (ValidationError, TypeError, ValueError):
        return None
    return data
