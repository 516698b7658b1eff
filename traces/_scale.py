"""Scaling an imported trace's token sizes, keeping which prompts share what.

A real trace shaped for a 200K-context model replays on a 4K model when every
size is multiplied by the same ``token_scale`` (the rule the generator uses):
prompts, outputs and shared heads shrink, think times and turns stay. Block
ids are rebuilt so content identity survives: scaled block ``j`` stands for
the original blocks ``[j/s, (j+1)/s)`` and gets one id per distinct run of
original ids, so two prompts that shared a prefix still share its scaled
image, and fresh content stays fresh.
"""

from __future__ import annotations

import math

from traces._errors import TraceError

__all__ = ["Scaler", "make_scaler", "scale_params"]


class Scaler:
    """Maps (block ids, tokens, output, shared blocks) to their scaled image."""

    def __init__(self, scale: float, block_size: int) -> None:
        if not (0 < scale <= 1 and math.isfinite(scale)):
            raise TraceError(f"must be in (0, 1], got {scale}", field="token_scale")
        self.scale, self.block_size = scale, block_size
        self._ids: dict[tuple[int, ...], int] = {}
        self._next = 0

    def _fresh(self) -> int:
        self._next += 1
        return self._next - 1

    def _id(self, key: tuple[int, ...]) -> int:
        got = self._ids.get(key)
        if got is None:
            got = self._ids[key] = self._fresh()
        return got

    def apply(self, full: list[int], tokens: int, output: int, shared: int
              ) -> tuple[list[int], int, int, int]:
        s, bs = self.scale, self.block_size
        scaled_tokens = max(1, round(tokens * s))
        out: list[int] = []
        for j in range(-(-scaled_tokens // bs)):
            lo, hi = int(j / s), max(int(j / s) + 1, int((j + 1) / s))
            key = tuple(full[lo:hi])
            out.append(self._id(key) if key and hi <= len(full) else self._fresh())
        return out, scaled_tokens, max(1, round(output * s)), min(int(shared * s), len(out))


def make_scaler(token_scale: float, block_size: int) -> Scaler | None:
    """A Scaler, or None when nothing changes (scale 1); checks the value."""
    scaler = Scaler(token_scale, block_size)
    return None if token_scale == 1 else scaler


def scale_params(token_scale: float) -> dict[str, object]:
    """Header params that state a scale (none when it is 1)."""
    return {} if token_scale == 1 else {"token_scale": token_scale}
