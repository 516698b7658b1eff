"""How the arms' vLLM servers are started: the knobs ``launch`` and
``compare --launch`` share, declared once (``replay.knobs``), so both commands
take the same flags with the same bounds and help."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from replay.knobs import Knob

__all__ = ["MAX_GPUS_PER_ARM", "LaunchSettings"]

MAX_GPUS_PER_ARM = 4096
"""More than any one server has; a larger count is a typo, not a plan."""

GpuCount = Annotated[int, Field(ge=1, le=MAX_GPUS_PER_ARM)]


class LaunchSettings(BaseModel):
    """Where the servers' vLLM comes from, their ports, and their GPUs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vllm_python: Annotated[str | None, Knob(
        "--vllm-python", "python of a venv with vLLM (runs its OpenAI server module); "
        "default: `vllm serve` from PATH", metavar="PY")] = None
    port: Annotated[int, Field(ge=1, le=65535), Knob(
        "--port", "the first arm's port (side by side: the next arms take the next "
        "ports)")] = 8000
    mode: Annotated[Literal["sequential", "side-by-side"], Knob(
        "--mode", "start one arm's server at a time (compare --launch starts the others in "
        "turn), or every arm at once on disjoint GPU sets")] = "sequential"
    gpus_per_arm: Annotated[GpuCount | None, Knob(
        "--gpus-per-arm", "GPUs of each arm, as CUDA_VISIBLE_DEVICES sets (side-by-side: "
        "required, disjoint sets; sequential: default all visible GPUs)", metavar="N")] = None
