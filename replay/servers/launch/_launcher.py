"""Start vLLM servers for A/B arms, prove what they run, and always stop them.

    specs = plan_arms(model, ["auto", "latency_specialized"], launcher=resolve_vllm_launcher(py))
    for spec in specs:                      # sequential: one arm at a time
        with launch_arm(spec, log_dir / f"{spec.label}.log") as arm:
            run_against(arm.url)

    with launch_arms(specs, log_dir) as arms:   # side by side: all at once
        ...

A launched server counts only after ``/server_info`` confirms the decode
backend that was asked for: a typo in a config or a server that ignores
``--additional-config`` must not produce a comparison of two identical arms.
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replay.errors import TargetError
from replay.servers.launch._spec import (
    API_SERVER_MODULE,
    LaunchMode,
    VllmArmSpec,
    build_command,
    build_env,
    format_command,
    plan_arms,
    resolve_vllm_launcher,
)
from replay.servers.launch._vllm_process import ServerProcess, group_members, port_is_free

__all__ = [
    "API_SERVER_MODULE",
    "DEFAULT_STARTUP_TIMEOUT_S",
    "LaunchMode",
    "LaunchedArm",
    "VllmArmSpec",
    "arm_log_path",
    "build_command",
    "build_env",
    "check_server_info",
    "fetch_server_info",
    "format_command",
    "group_members",
    "launch_arm",
    "launch_arms",
    "plan_arms",
    "resolve_vllm_launcher",
]

DEFAULT_STARTUP_TIMEOUT_S = 1800.0  # large models on GPUs load for many minutes
DEFAULT_STOP_GRACE_S = 30.0


@dataclass(frozen=True)
class LaunchedArm:
    """A running, verified server."""

    spec: VllmArmSpec
    url: str
    pid: int
    log_path: Path
    startup_s: float
    server_info: Mapping[str, Any] = field(repr=False)


def arm_log_path(log_dir: Path, index: int, spec: VllmArmSpec) -> Path:
    """Where arm ``index`` writes its server log."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in spec.label)
    return log_dir / f"arm{index}-{safe}.log"


_INFO_LIMIT = 16 << 20
"""The largest /server_info answer read (bytes)."""


def fetch_server_info(url: str, timeout: float = 10.0) -> dict[str, Any]:
    """``GET /server_info?config_format=json`` (needs ``VLLM_SERVER_DEV_MODE=1``)."""
    try:
        with urllib.request.urlopen(f"{url}/server_info?config_format=json", timeout=timeout) as r:
            body = r.read(_INFO_LIMIT + 1)
    except urllib.error.HTTPError as exc:
        raise TargetError(
            f"{url}/server_info answered HTTP {exc.code}; is VLLM_SERVER_DEV_MODE=1 set?"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        raise TargetError(f"{url}/server_info: {exc}") from None
    if len(body) > _INFO_LIMIT:
        raise TargetError(f"{url}/server_info: the answer went past {_INFO_LIMIT:,} bytes")
    try:
        info = json.loads(body)
    except ValueError:  # not JSON, or not UTF-8
        raise TargetError(f"{url}/server_info: not JSON") from None
    if not isinstance(info, dict):
        raise TargetError(f"{url}/server_info: not a JSON object")
    return info


def check_server_info(info: Mapping[str, Any], spec: VllmArmSpec) -> None:
    """Fail unless the server runs the decode backend (and model name) asked for."""
    config = info.get("vllm_config")
    if not isinstance(config, Mapping):
        raise TargetError(f"arm {spec.label}: /server_info has no vllm_config")
    additional = config.get("additional_config") or {}
    got = additional.get("decode_backend") if isinstance(additional, Mapping) else None
    if got != spec.decode_backend:
        raise TargetError(
            f"arm {spec.label}: /server_info reports decode_backend={got!r}, "
            f"asked for {spec.decode_backend!r}"
        )
    model_config = config.get("model_config")
    if spec.served_model_name and isinstance(model_config, Mapping):
        served = model_config.get("served_model_name")
        names = served if isinstance(served, list) else [served]
        if served is not None and spec.served_model_name not in names:
            raise TargetError(
                f"arm {spec.label}: /server_info serves {served!r}, "
                f"asked for {spec.served_model_name!r}"
            )


@contextlib.contextmanager
def _launch(
    specs: Sequence[VllmArmSpec],
    log_paths: Sequence[Path],
    startup_timeout: float,
    stop_grace: float,
    base_env: Mapping[str, str] | None,
) -> Iterator[list[LaunchedArm]]:
    ports = [(s.host, s.port) for s in specs]
    if len(set(ports)) != len(ports):
        raise TargetError("arms launched together need distinct ports (use side-by-side)")
    for spec in specs:
        if not port_is_free(spec.host, spec.port):
            raise TargetError(f"arm {spec.label}: port {spec.port} on {spec.host} is in use")
    procs = [
        ServerProcess(build_command(spec), build_env(spec, base_env), path, spec.label,
                      spec.cpus)
        for spec, path in zip(specs, log_paths, strict=True)
    ]
    try:
        for proc in procs:  # start all first: side-by-side arms load in parallel
            proc.start()
        arms = []
        for spec, proc in zip(specs, procs, strict=True):
            took = proc.wait_healthy(spec.url, startup_timeout)
            proc.repin()
            info = fetch_server_info(spec.url)
            check_server_info(info, spec)
            assert proc.pid is not None
            arms.append(LaunchedArm(spec, spec.url, proc.pid, proc.log_path, took, info))
        yield arms
    finally:
        _stop_all(procs, stop_grace)


def _stop_all(procs: Sequence[ServerProcess], grace: float) -> None:
    """Stop every process; a Ctrl-C during the grace period kills at once instead."""
    for proc in procs:
        proc.terminate()
    interrupted = False
    pending = list(procs)
    while pending:
        try:
            pending[0].stop(0.0 if interrupted else grace)
        except KeyboardInterrupt:
            interrupted = True
            continue
        pending.pop(0)
    if interrupted:
        raise KeyboardInterrupt


@contextlib.contextmanager
def launch_arms(
    specs: Sequence[VllmArmSpec],
    log_dir: Path,
    *,
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT_S,
    stop_grace: float = DEFAULT_STOP_GRACE_S,
    base_env: Mapping[str, str] | None = None,
) -> Iterator[list[LaunchedArm]]:
    """Start all arms at once, wait until each is healthy and verified, yield them.

    Logs go to ``arm_log_path(log_dir, i, spec)``. Every started process group
    is stopped on exit, on errors and on Ctrl-C.
    """
    paths = [arm_log_path(log_dir, i, spec) for i, spec in enumerate(specs)]
    with _launch(specs, paths, startup_timeout, stop_grace, base_env) as arms:
        yield arms


@contextlib.contextmanager
def launch_arm(
    spec: VllmArmSpec,
    log_path: Path,
    *,
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT_S,
    stop_grace: float = DEFAULT_STOP_GRACE_S,
    base_env: Mapping[str, str] | None = None,
) -> Iterator[LaunchedArm]:
    """Start one arm, logging to ``log_path``; yield it once verified; always stop it."""
    with _launch([spec], [log_path], startup_timeout, stop_grace, base_env) as arms:
        yield arms[0]
