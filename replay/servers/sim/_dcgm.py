"""A modelled DCGM exporter: the simulated GPUs' power, utilisation and memory.

``GET /dcgm/metrics`` answers as NVIDIA's dcgm-exporter does on ``:9400/metrics``
(one series per GPU, labelled ``gpu``, ``UUID``, ``device``, ``modelName``,
``Hostname``), so ``run --gpu-metrics`` can be shown and tested against it.

The power model is an assumption, stated here and in the report: each GPU draws
``idle_power_w`` when the engine is idle and ``busy_power_w`` while an engine step
runs, so power = idle + (busy - idle) x engine utilisation. The utilisation of a
scrape is the busy share of the time since the scrape before (the engine's step
time, ``vllm_sim:engine_step_actual_seconds_total``), so integrating the
reported power sample by sample gives back the model's energy over the step log
(:func:`modelled_energy_j`). ``DCGM_FI_DEV_FB_USED`` is ``gpu_memory_utilization``
(0.9) of the profile's memory, as vLLM allocates its KV cache up front.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable

from replay.servers.sim._profile import SimProfile
from replay.servers.sim._truth import StepTruth

__all__ = ["DCGM_PATH", "PowerMeter", "modelled_energy_j"]

DCGM_PATH = "/dcgm/metrics"
_FB_SHARE = 0.9


class PowerMeter:
    """The modelled exporter's state: when it was last scraped and how busy the engine
    had been by then."""

    def __init__(self, profile: SimProfile, busy_s: float = 0.0) -> None:
        self.profile = profile
        self._start_ns = self._last_ns = time.monotonic_ns()
        self._last_busy = busy_s
        self._host = socket.gethostname()

    def utilisation(self, now_ns: int, busy_s: float) -> float:
        """The engine's busy share since the scrape before (0..1); moves the mark.

        A step is counted when it is delivered, so one that began before the scrape
        before can bring more busy time than the interval holds: the excess is
        carried to the next scrape, not dropped, so the reported power integrates to
        the model's energy."""
        dt = (now_ns - self._last_ns) / 1e9
        self._last_ns = now_ns
        if dt <= 0:
            return 0.0
        u = min(1.0, max(0.0, (busy_s - self._last_busy) / dt))
        self._last_busy += u * dt
        return u

    def render(self, busy_s: float, now_ns: int | None = None) -> str:
        """The exporter's text for one scrape; ``busy_s``: the engine's step seconds so far."""
        now = time.monotonic_ns() if now_ns is None else now_ns
        p = self.profile
        u = self.utilisation(now, busy_s)
        power = p.idle_power_w + (p.busy_power_w - p.idle_power_w) * u
        up_s = (now - self._start_ns) / 1e9
        energy_mj = 1000.0 * (p.idle_power_w * up_s + (p.busy_power_w - p.idle_power_w) * busy_s)
        fb = round(p.gpu_memory_mib * _FB_SHARE)
        series = [
            ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", f"{power:.3f}"),
            ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", f"{round(100 * u)}"),
            ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", f"{fb}"),
            ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
             "Total energy consumption since boot (in mJ).", f"{energy_mj:.0f}"),
        ]
        lines: list[str] = []
        for name, kind, doc, value in series:
            lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}"]
            for k in range(p.gpu_count):
                labels = (f'gpu="{k}",UUID="GPU-sim-{k:04d}",device="nvidia{k}",'
                          f'modelName="{p.gpu}",Hostname="{self._host}"')
                lines.append(f"{name}{{{labels}}} {value}")
        return "\n".join(lines) + "\n"


def modelled_energy_j(profile: SimProfile, steps: Iterable[StepTruth], start_ns: int,
                      end_ns: int) -> float:
    """The power model integrated over the step log between two instants, all GPUs:
    idle power throughout, plus (busy - idle) over each step's span (its ``actual_s``
    up to its delivery) inside the interval. The truth a scraped energy is checked on."""
    busy = 0.0
    for s in steps:
        a = max(start_ns, s.end_ns - int(s.actual_s * 1e9))
        b = min(end_ns, s.end_ns)
        if b > a:
            busy += (b - a) / 1e9
    p = profile
    per_gpu = p.idle_power_w * (end_ns - start_ns) / 1e9 + (p.busy_power_w - p.idle_power_w) * busy
    return per_gpu * p.gpu_count
