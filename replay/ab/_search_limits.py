"""How far ``compare --search`` may go: its knobs, declared once (``replay.knobs``),
so the flags, the experiment file's keys and their bounds come from one place."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from analysis.text import plural
from replay.errors import ConfigError
from replay.knobs import Knob

__all__ = ["SearchLimits", "check_search_start"]


class SearchLimits(BaseModel):
    """The largest level, the runs per arm, and when a bracket is narrow enough."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_users: Annotated[int, Field(ge=1, le=1_000_000), Knob(
        "--search-max-users", "largest user count the search tries", metavar="N")] = 256
    max_probes: Annotated[int, Field(ge=1, le=10_000), Knob(
        "--search-max-probes", "at most this many runs per arm in a search; when they run "
        "out the answer is the bracket as far as it got", metavar="N")] = 12
    precision: Annotated[float | None, Field(gt=0, lt=10), Knob(
        "--search-precision", "stop bisecting once (failed - passed) / passed is at most "
        "this relative width, e.g. 0.1 for 10%% (default: one user wide)",
        metavar="WIDTH")] = None
    method: Annotated[Literal["twin", "bisect"], Knob(
        "--search-method", "where the next probe goes: twin (the twin fitted on the probes "
        "so far places it at its predicted boundary; bisection where its interval is wide, "
        "the fit fails or a probe contradicts it) or bisect (doubling, then halving)",
        metavar="METHOD")] = "bisect"
    """Default bisect: on hidden profiles the twin with early stop used 0.55-0.76x
    bisection's GPU-seconds, and its brackets held the truth no more often than
    bisection's (bench/README.md)."""
    full_window: Annotated[bool, Knob(
        "--search-full-window", "run every probe's whole window (default: a probe stops "
        "once every searched tier's verdict is settled at 99%%, whichever way its requests "
        "in flight end, after at least 40 requests and a quarter of the window)")] = False
    """Early stop is the search's default: a probe is asked one question per tier."""


def check_search_start(start: int, limits: SearchLimits) -> None:
    """Refuse a first level the limits cannot reach, naming the flags."""
    if not 1 <= start <= limits.max_users:
        raise ConfigError(f"--users {start}: the search starts at 1 to "
                          f"{plural(limits.max_users, 'user')} (--search-max-users)")
