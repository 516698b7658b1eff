"""GPU telemetry from a DCGM exporter's ``/metrics`` (``run --gpu-metrics URL``).

NVIDIA's dcgm-exporter (default port 9400) writes one series per GPU, labelled
``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname``; of its default
counters we keep ``DCGM_FI_DEV_POWER_USAGE`` (W, a gauge), ``DCGM_FI_DEV_GPU_UTIL``
(%), ``DCGM_FI_DEV_FB_USED`` (MiB) and ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``
(mJ since boot). A sample is the exporter's GPUs together: power, memory and
energy summed, utilisation their mean, and how many GPUs reported power. A
field the exporter did not send is absent from the sample, never 0, so missing
telemetry reads as missing.
"""

from __future__ import annotations

import math
from urllib.parse import urlsplit

__all__ = ["DCGM_FIELDS", "gpu_metrics_url", "parse_dcgm"]

DCGM_FIELDS = {
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_GPU_UTIL": "gpu_util_pct",
    "DCGM_FI_DEV_FB_USED": "fb_used_mib",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "energy_mj",
}
"""Exporter field -> the sample's key."""
_MEAN = frozenset({"gpu_util_pct"})


def parse_dcgm(text: str) -> dict[str, float]:
    """One sample of the exporter's GPUs (see the module docstring)."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if not line.startswith("DCGM_FI_DEV_"):
            continue
        brace = line.find("{")
        if brace >= 0:
            name, rest = line[:brace], line[line.rfind("}") + 1:].split()
        else:
            parts = line.split()
            name, rest = parts[0], parts[1:]
        key = DCGM_FIELDS.get(name)
        if key is None or not rest:
            continue
        try:
            value = float(rest[0])
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        sums[key] = sums.get(key, 0.0) + value
        counts[key] = counts.get(key, 0) + 1
    out = {k: (v / counts[k] if k in _MEAN else v) for k, v in sums.items()}
    if "power_w" in counts:
        out["gpus"] = float(counts["power_w"])
    return out


def gpu_metrics_url(url: str) -> str:
    """The exporter's metrics URL: a bare ``http://host:9400`` gets ``/metrics``."""
    if urlsplit(url).path in ("", "/"):
        return url.rstrip("/") + "/metrics"
    return url
