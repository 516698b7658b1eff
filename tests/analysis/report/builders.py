"""Result directories for report tests: a sweep of levels per arm, written as runs do."""

from __future__ import annotations

from pathlib import Path

from tests.analysis.builders import config, make_run, synth_records

ARMS = {"auto": 0.008, "latency_specialized": 0.0045}
"""Arm label -> TPOT at one user (s): the second arm is faster, as in the demo."""


def make_sweep(
    root: Path, *, arms: dict[str, float] | None = None, levels: tuple[int, ...] = (1, 4, 16),
    fingerprint: str = "fp1", per_user: int = 6, simulated: bool = True, label: str | None = None,
    rates: tuple[float, ...] | None = None,
) -> Path:
    """One run directory per (arm, level) under ``root/runs``; TPOT grows with users.
    With ``rates``: open-loop levels (sessions/s), ``levels`` then gives each one's users."""
    for arm, tpot in (arms or ARMS).items():
        for k, users in enumerate(levels):
            rate = rates[k] if rates else None
            recs = synth_records(users=users, per_user=per_user, tpot=tpot * (1 + users / 8),
                                 ttft=0.05 * (1 + users / 4), seed=users, out_tokens=40)
            end = max(r["last_token_s"] or 0 for r in recs) + 1.0
            metrics = [{"t_s": float(t), "values": {
                "vllm:kv_cache_usage_perc": 0.1 + 0.01 * t,
                "vllm:prefix_cache_hits_total": 40.0 * t,
                "vllm:prefix_cache_queries_total": 100.0 * t}} for t in range(int(end) + 2)]
            name = f"{arm}-u{users}" if rate is None else f"{arm}-rate{rate:g}"
            load = {"users": users, "duration_s": 100, "warmup_s": 10, "drain_s": 5}
            extra = {}
            if rate is not None:
                load.update(arrival="open", rate=rate)
                extra["load_kind"] = "rate"
            make_run(root / "runs" / name, recs, metrics=metrics, **extra,
                     label=arm if label is None else label, run_id=name, simulated=simulated,
                     server_info={"vllm_config": config(arm)},
                     workload={"fingerprint": fingerprint, "source": "coding-agent", "seed": 1},
                     load=load, window={"start_s": 10.0, "end_s": end})
    return root
