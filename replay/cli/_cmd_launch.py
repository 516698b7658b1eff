"""``agentreplay launch``: start vLLM servers for A/B arms (or print their commands)."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from analysis.text import plural
from replay.errors import TargetError

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    from replay.knobs import add_knob_flags
    from replay.servers.launch import LaunchSettings

    parser = subparsers.add_parser(
        "launch",
        help="start vLLM servers whose arms differ only in decode_backend",
        description=(
            "Start one vLLM server per --arm with identical arguments except "
            "--additional-config '{\"decode_backend\": ARM}', check /server_info, and keep "
            "them until Ctrl-C. Sequential mode starts the first arm (compare --launch runs "
            "the others in turn); side-by-side starts all on disjoint GPU sets. "
            "Arguments after -- go to every server unchanged."
        ),
    )
    parser.add_argument("--model", required=True, help="model directory or name")
    parser.add_argument("--served-model-name", default=None,
                        help="name the servers answer to (default: the --model value)")
    parser.add_argument(
        "--arm", action="append", required=True, metavar="BACKEND",
        help="a decode_backend value, once per arm (e.g. auto, latency_specialized)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address the servers listen on")
    add_knob_flags(parser, LaunchSettings)  # --vllm-python, --port, --mode, --gpus-per-arm
    parser.add_argument("--dry-run", action="store_true", help="print the command lines only")
    parser.add_argument("--log-dir", type=Path, default=Path("launch-logs"),
                        help="directory of the servers' log files")
    parser.add_argument(
        "--startup-timeout", type=float, default=None, metavar="S",
        help="seconds to wait for /health (default 1800)",
    )
    parser.add_argument("extra", nargs="*", metavar="-- EXTRA", help="vLLM arguments")
    parser.set_defaults(func=run)


def _tick() -> None:
    """One beat of the serve loop (tests replace it to simulate Ctrl-C)."""
    time.sleep(1.0)


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class _Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP: stop like Ctrl-C, exit 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise _Stopped(signum)


def _launcher(vllm_python: str | None, *, dry_run: bool) -> tuple[tuple[str, ...], str]:
    """The vLLM launcher and a note; a dry run only prints commands, so it does not
    need vLLM here and falls back to the command as written (``vllm serve`` or
    ``PY -m ...``), noting why."""
    from replay.errors import ConfigError
    from replay.servers.launch import API_SERVER_MODULE, resolve_vllm_launcher

    try:
        return resolve_vllm_launcher(vllm_python), ""
    except ConfigError as exc:
        if not dry_run:
            raise
        note = f"note: {exc}; the commands are printed as written"
        if vllm_python:
            return (vllm_python, "-m", API_SERVER_MODULE), note
        return ("vllm", "serve"), note


def run(args: argparse.Namespace) -> int:
    from replay.knobs import from_knobs, knob_values
    from replay.servers.launch import (
        DEFAULT_STARTUP_TIMEOUT_S,
        LaunchMode,
        LaunchSettings,
        format_command,
        group_members,
        launch_arms,
        plan_arms,
    )

    how = from_knobs(LaunchSettings, knob_values(args, LaunchSettings))
    mode = LaunchMode(how.mode)
    launcher, note = _launcher(how.vllm_python, dry_run=args.dry_run)
    specs = plan_arms(
        args.model,
        args.arm,
        launcher=launcher,
        port=how.port,
        mode=mode,
        gpus_per_arm=how.gpus_per_arm,
        served_model_name=args.served_model_name,
        host=args.host,
        extra_args=args.extra,
    )
    if args.dry_run:
        if note:
            print(note, file=sys.stderr)
        for i, spec in enumerate(specs):
            print(f"# arm {i}: decode_backend={spec.decode_backend} url={spec.url}")
            print(format_command(spec))
        return 0

    from replay.cli._files import check_output_dir

    check_output_dir(args.log_dir, "--log-dir")  # before any server starts
    to_start = specs if mode is LaunchMode.SIDE_BY_SIDE else specs[:1]
    timeout = args.startup_timeout or DEFAULT_STARTUP_TIMEOUT_S
    previous = {sig: signal.signal(sig, _raise_interrupt) for sig in _STOP_SIGNALS}
    code = 0
    try:
        print(f"starting {plural(len(to_start), 'server')}; logs in {args.log_dir}",
              file=sys.stderr)
        with launch_arms(to_start, args.log_dir, startup_timeout=timeout) as arms:
            for arm in arms:
                print(
                    f"arm {arm.spec.decode_backend}: {arm.url} "
                    f"(pid {arm.pid}, ready in {arm.startup_s:.0f} s, log {arm.log_path})"
                )
            if len(specs) > len(to_start):
                print("sequential mode: other arms are started in turn by compare --launch",
                      file=sys.stderr)
            print("serving; Ctrl-C stops all", file=sys.stderr)
            sys.stdout.flush()
            try:
                while True:
                    _tick()
                    for arm in arms:
                        if not group_members(arm.pid):
                            raise TargetError(
                                f"arm {arm.spec.decode_backend}: server exited; "
                                f"see {arm.log_path}"
                            )
            except KeyboardInterrupt as exc:
                print("stopping", file=sys.stderr)
                code = 128 + exc.signum if isinstance(exc, _Stopped) else 0
    except _Stopped as exc:  # signalled while a server was starting or stopping
        print("agentreplay: stopped, servers shut down", file=sys.stderr)
        return 128 + exc.signum
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code
