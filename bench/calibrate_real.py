"""The twin against a real vLLM CPU server: runs at 1, 2, 4 and 8 users, a twin fitted on
1, 2, 4 with ``agentreplay calibrate --holdout 8``, and the held-out level's predicted vs
measured P90 interactivity, P90 TTFT and output throughput, with the 15% target. Then
the held-out level is run once more, and printed: the spread of each level's repeated
runs, and the twin's stored prediction interval at the held-out level (as ``plan
--twin`` draws it) beside every measured run's value and 95% interval, the rerun (a
measurement the interval was not sized on) counted apart.

    python bench/calibrate_real.py --url http://127.0.0.1:8000   # a server started by hand
    python bench/calibrate_real.py                               # launches the tiny model
    python bench/calibrate_real.py --duration 60 --repeats 2 --keep DIR
    python bench/calibrate_real.py --report DIR                  # print a kept DIR again

The accuracy is a figure, not a test: on a CPU shared with other work the runs
themselves do not repeat (a busy 2-core machine gave -69%, -75% and +102% in three
tries), so only a quiet machine measures the twin. ``tests/vllm/test_calibrate_real.py``
runs the same flow and asserts what holds on a busy machine too (the fit against the
server's own counters and facts).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from replay.errors import ConfigError  # noqa: E402

LEVELS = (1, 2, 4, 8)
TARGET = 0.15


def _reset_cache(url: str) -> None:
    req = urllib.request.Request(url + "/reset_prefix_cache", data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=30):
        pass


def make_workload(path: Path) -> Path:
    """Small prompts, short think times: the tiny CPU model at 1-8 users in seconds."""
    from traces import generate, write_workload

    header, sessions = generate("coding-agent", sessions=8, seed=3, block_size=16,
                                max_context=2048, prompt_scale=0.02, think_scale=0.01,
                                output_scale=0.2)
    write_workload(path, header, sessions)
    return path


def run_levels(url: str, workload: Path, runs: Path, duration_s: float = 30,
               levels: tuple[int, ...] = LEVELS, suffix: str = "",
               health: list[tuple[str, str]] | None = None) -> list[Path]:
    """One cold-cache run per level (every level starts cold, as the twin's sim does);
    each run's validity and client health (with the load average then) go to
    ``health``."""
    from replay.cli import main

    dirs = []
    for users in levels:
        _reset_cache(url)
        out = runs / f"u{users}{suffix}"
        code = main(["run", "--target", url, "--workload", str(workload), "--users",
                     str(users), "--warmup", "3", "--duration", str(duration_s), "--drain", "20",
                     "--out", str(out), "--quiet", "--metrics-interval", "1"])
        if code not in (0, 3):
            raise SystemExit(f"run at {users} users failed (exit {code})")
        dirs.append(out)
        if health is not None:
            verdict, line = health_line(out)
            health.append((verdict, f"{line}; load average {os.getloadavg()[0]:.1f}"))
    return dirs


def calibrate(dirs: list[Path], workload: Path, twin: Path) -> dict[str, Any]:
    """``agentreplay calibrate ... --holdout 8``; the twin file's calibration block."""
    from replay.cli import main

    code = main(["calibrate", *map(str, dirs), "-o", str(twin), "--holdout", str(LEVELS[-1]),
                 "--workload", str(workload), "--force"])
    if code != 0:
        raise SystemExit(f"calibrate failed (exit {code})")
    cal: dict[str, Any] = json.loads(twin.read_text())["calibration"]
    return cal


@contextlib.contextmanager
def _server(url: str | None, pin_server: tuple[int, ...] | None,
            port: int | None = None) -> Iterator[str]:
    if url:
        yield url.rstrip("/")
        return
    from replay.servers.launch import launch_arm, plan_arms, resolve_vllm_launcher
    from tests.support.vllm import (
        CPU_ARGS,
        CPU_ENV,
        DEFAULT_MODEL,
        SERVED_NAME,
        STARTUP_TIMEOUT_S,
        free_port,
        vllm_python,
    )

    (spec,) = plan_arms(str(DEFAULT_MODEL), ["auto"],
                        launcher=resolve_vllm_launcher(str(vllm_python())),
                        port=port or free_port(),
                        served_model_name=SERVED_NAME, extra_args=CPU_ARGS, env=dict(CPU_ENV),
                        cpus=pin_server)
    log = Path(tempfile.mkdtemp()) / "server.log"
    with launch_arm(spec, log, startup_timeout=STARTUP_TIMEOUT_S) as arm:
        yield arm.url


def pinning(args: argparse.Namespace) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """The server's and the client's CPUs: as given, else (a launched server on a machine
    of 2+ cores) the last core for the server and the others for the client. Left to
    float, vLLM's API server, engine core and OpenMP worker take the client's core and
    its idle event loop waits for a CPU (stalls the watchdog names ``starved``)."""
    from replay.servers.launch import parse_cpus

    server = parse_cpus(args.pin_server, "--pin-server") if args.pin_server else None
    client = parse_cpus(args.pin_client, "--pin-client") if args.pin_client else None
    cores = sorted(os.sched_getaffinity(0))
    if args.no_pin or args.url or len(cores) < 2:
        return server, client
    if server is None and client is None:
        return (cores[-1],), tuple(cores[:-1])
    if server is not None and client is None:
        client = tuple(c for c in cores if c not in server) or None
    return server, client


def health_line(run: Path) -> tuple[str, str]:
    """A run's verdict, and the verdict (with the codes of its reasons)
    and client-health figures in one line."""
    m = json.loads((run / "run.json").read_text())
    h, v = m.get("client_health") or {}, m["validity"]
    kinds = h.get("loop_stall_kinds") or {}
    stalls = ", ".join(f"{n} {k}" for k, n in kinds.items()) or "none"
    top = (h.get("loop_stalls") or [{}])[0]
    where = "" if top.get("kind") == "starved" else " <- ".join(top.get("frames", [])[:2])
    sched = h.get("schedule_lag_p99_s")
    codes = ",".join(r["code"] for r in v["reasons"])
    lag_max = 1e3 * (h.get("loop_lag_max_s") or 0)
    line = (f"{run.name}: {v['verdict']}{f' ({codes})' if codes else ''}; loop lag max "
            f"{lag_max:.0f} ms, schedule lag P99 "
            f"{'n/a' if sched is None else f'{1e3 * sched:.0f} ms'}, "
            f"client CPU {100 * (h.get('cpu_share') or 0):.1f}%; stalls >100 ms: {stalls}"
            + (f"; longest {1e3 * top['lag_s']:.0f} ms {top['kind']}"
               f"{' at ' + where if where else ''}" if top else ""))
    return str(v["verdict"]), line


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="a running vLLM server (else the tiny model is launched)")
    p.add_argument("--keep", metavar="DIR", help="keep the workload, runs and twin here")
    p.add_argument("--duration", type=float, default=30,
                   help="seconds measured per level (default 30: a P90 of fewer requests "
                   "is mostly noise)")
    p.add_argument("--repeats", type=int, default=1,
                   help="run every level this many times, the order reversed each time "
                   "(1 2 4 8 8 4 2 1 ...) so the machine's drift is spread over the levels; "
                   "calibrate fits on all of them and measures the held-out level as the "
                   "mean of its runs (default 1)")
    p.add_argument("--pin-server", metavar="CPUS",
                   help="confine the launched server (every process and thread) to these "
                   "CPUs, e.g. 1 or 2-3 (default: the last core when the machine has 2+)")
    p.add_argument("--pin-client", metavar="CPUS",
                   help="confine this client to these CPUs (default: the cores the server "
                   "was not given)")
    p.add_argument("--no-pin", action="store_true", help="let the server and client float")
    p.add_argument("--port", type=int,
                   help="the launched server's port on 127.0.0.1 (default: a free one)")
    p.add_argument("--report", metavar="DIR",
                   help="print what a DIR kept by --keep shows (no server, no runs)")
    args = p.parse_args()
    if args.report:
        report(Path(args.report))
        return
    from replay.cli._signals import stop_signals

    # a kill or a closed terminal stops like Ctrl-C: the launched server's whole
    # process group is stopped on the way out, never left holding its CPU and port
    with stop_signals() as received:
        try:
            _main(args)
        except KeyboardInterrupt:
            raise SystemExit(128 + received[0] if received else 130) from None


def _main(args: argparse.Namespace) -> None:
    try:
        server_cpus, client_cpus = pinning(args)
    except ConfigError as exc:
        raise SystemExit(f"calibrate_real: {exc}") from None
    health: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp, _server(args.url, server_cpus, args.port) as url:
        if client_cpus is not None:
            from replay.servers.launch import pin_client

            pin_client(client_cpus)
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        wl = make_workload(root / "wl.jsonl")
        dirs: list[Path] = []
        for k in range(args.repeats):
            order = LEVELS if k % 2 == 0 else LEVELS[::-1]
            dirs += run_levels(url, wl, root / "runs", args.duration, order,
                               f"-r{k}" if args.repeats > 1 else "", health)
        calibrate(dirs, wl, root / "twin.json")
        # the held-out level once more: how far the measurement itself repeats is the
        # floor under any prediction error, and a measurement the interval was not
        # sized on
        run_levels(url, wl, root / "runs", args.duration, LEVELS[-1:], "-repeat", health)
        print(f"pinned: server {_cpus(server_cpus)}, client {_cpus(client_cpus)}; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
              f"({args.duration:g} s per level, {args.repeats} run(s) each)")
        report(root, health)


def _level_runs(runs: Path) -> dict[int, list[Path]]:
    """The kept runs of each level (``u8``, ``u8-r0``, ``u8-repeat``), by users."""
    out: dict[int, list[Path]] = {}
    for d in sorted(runs.iterdir()):
        head = d.name.split("-")[0]
        if d.is_dir() and head[1:].isdigit() and (d / "run.json").exists():
            out.setdefault(int(head[1:]), []).append(d)
    return out


def report(root: Path, health: list[tuple[str, str]] | None = None) -> None:
    """What a kept DIR shows: each run's validity and client health, the held-out
    errors, the rerun spread per level and the twin's interval at the held-out level
    beside the measured values and their own 95% intervals."""
    from _real_interval import interval_lines
    from _real_spread import spread_lines

    from replay.twin import interval_of, measured_metrics
    from replay.twin._holdout import measured_level

    by_level = _level_runs(root / "runs")
    if health is None:  # a kept DIR read again: the load average then is not known
        health = [health_line(d) for u in sorted(by_level) for d in by_level[u]]
    for _, line in health:
        print(line)
    verdicts = Counter(verdict for verdict, _ in health)
    print(f"of {len(health)} runs: {verdicts['valid']} valid, {verdicts['caveats']} with "
          f"caveats, {verdicts['invalid']} invalid"
          + (": the errors below rest on invalid runs" if verdicts["invalid"] else ""))
    cal = json.loads((root / "twin.json").read_text())["calibration"]
    (hold,) = cal["holdouts"]
    users = int(hold["users"])
    held = [d for d in by_level[users] if not d.name.endswith("-repeat")]
    again = [d for d in by_level[users] if d.name.endswith("-repeat")]
    repeat = measured_metrics(again[0]).as_dict() if again else {}
    for key, err in hold["relative_error"].items():
        mark = "" if err is None else (" (within 15%)" if abs(err) <= TARGET else " (over 15%)")
        shown = "n/a" if err is None else f"{err:+.1%}"
        first, second = hold["measured"][key], repeat.get(key)
        rerun = "n/a" if not first or second is None else f"{second / first - 1:+.1%}"
        print(f"held out {users} users, {key}: predicted {_g(hold['predicted'][key])}, "
              f"measured {_g(first)} (mean of {len(held)} run(s)), error {shown}{mark}; "
              f"the same level rerun: {_g(second)} ({rerun})")
    for line in spread_lines({u: [measured_metrics(d).as_dict() for d in ds]
                              for u, ds in by_level.items()}):
        print(line)
    interval = interval_of(cal)
    if interval is None:
        print("no prediction interval stored (calibrated without --holdout)")
        return
    for line in interval_lines(interval, hold["predicted"], [measured_level(d) for d in held],
                               measured_level(again[0]) if again else None):
        print(line)


def _g(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def _cpus(cpus: tuple[int, ...] | None) -> str:
    return "not pinned" if cpus is None else "CPU " + ",".join(map(str, cpus))


if __name__ == "__main__":
    main()
