"""``agentreplay traces``: generate, import, inspect and validate workload files."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from analysis.text import plural

__all__ = ["register"]

_FORMATS = ("azure", "mooncake", "tracelab", "weka")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "traces", help="make, import and check workload files",
        description="Workload files: synthetic generation, trace import, statistics.",
    )
    sub = parser.add_subparsers(dest="traces_command", metavar="ACTION")
    parser.set_defaults(func=lambda _args: _usage(parser))

    gen = sub.add_parser("generate", help="synthesise agent sessions from a profile")
    gen.add_argument("--profile", default="coding-agent",
                     help="coding-agent (calibrated to WEKA/AgentX) or decode (fixed sizes, "
                          "no think time, no reuse: levels are batch sizes)")
    gen.add_argument("--sessions", type=int, required=True, help="sessions to generate")
    gen.add_argument("--seed", type=int, default=0,
                     help="seed of every draw (same seed and flags: the same file)")
    gen.add_argument("--max-context", type=int, default=131_072,
                     help="the model's context; below 200000 token sizes are scaled to fit "
                          "(session shape kept; the scale is stated)")
    gen.add_argument("--block-size", type=int, default=64,
                     help="tokens per prefix block (the unit of shared prefixes)")
    gen.add_argument("--prompt-scale", type=float, default=None,
                     help="multiply prompt sizes (default: the scale for --max-context)")
    gen.add_argument("--think-scale", type=float, default=1.0,
                     help="multiply the think times written to the file")
    gen.add_argument("--output-scale", type=float, default=None,
                     help="multiply output sizes (default: as prompts)")
    gen.add_argument("--agent-types", type=int, default=None,
                     help="use only the first N agent types of the profile")
    gen.add_argument("--input-tokens", type=int, default=1, help="decode profile: prompt size")
    gen.add_argument("--output-tokens", type=int, default=1000,
                     help="decode profile: output size (ignore_eos: exactly this many)")
    gen.add_argument("--requests-per-session", type=int, default=1,
                     help="decode profile: independent requests per session")
    gen.add_argument("-o", "--output", required=True, help="workload file to write (.jsonl)")
    gen.add_argument("--force", action="store_true", help="replace --output if it exists")
    gen.set_defaults(func=_generate)

    imp = sub.add_parser("import", help="convert a real trace into a workload file")
    imp.add_argument("--format", choices=_FORMATS, required=True,
                     help="the trace's format (weka takes a folder of session files, "
                          "the others one file)")
    imp.add_argument("path", help="trace file (or folder of WEKA session files)")
    imp.add_argument("-o", "--output", required=True, help="workload file to write (.jsonl)")
    imp.add_argument("--force", action="store_true", help="replace --output if it exists")
    imp.add_argument("--max-context", type=int, default=None,
                     help="the model's context: below 200000 token sizes are scaled to fit "
                          "(session shape kept), then requests that still would not fit are "
                          "compacted (both stated in the header)")
    imp.add_argument("--token-scale", type=float, default=None,
                     help="multiply every token size by this (0 < x <= 1; default: the "
                          "scale for --max-context, 1 without it)")
    imp.add_argument("--dedupe", action="store_true",
                     help="drop sessions whose content repeats an earlier one "
                          "(default: keep them; they are counted either way)")
    imp.set_defaults(func=_import)

    ins = sub.add_parser("inspect", help="statistics of a workload file")
    ins.add_argument("file", help="workload file (.jsonl)")
    ins.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ins.set_defaults(func=_inspect)

    val = sub.add_parser("validate", help="check every line and the fingerprint")
    val.add_argument("file", help="workload file (.jsonl)")
    val.set_defaults(func=_validate)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _positive(value: int | None, option: str) -> None:
    from replay.errors import ConfigError

    if value is not None and value < 1:
        raise ConfigError(f"{option} must be >= 1, got {value}")


def _generate(args: argparse.Namespace) -> int:
    from replay.cli._files import refuse_existing
    from replay.errors import ConfigError
    from traces import TraceError, generate_trace, write_workload

    _positive(args.max_context, "--max-context")
    _positive(args.block_size, "--block-size")
    try:
        trace = generate_trace(
            args.profile, sessions=args.sessions, seed=args.seed,
            max_context=args.max_context, block_size=args.block_size,
            prompt_scale=args.prompt_scale, think_scale=args.think_scale,
            output_scale=args.output_scale, agent_types=args.agent_types,
            input_tokens=args.input_tokens, output_tokens=args.output_tokens,
            requests_per_session=args.requests_per_session,
        )
    except TraceError as exc:  # a bad knob: name the option, not a file
        option = f"--{(exc.field or 'option').replace('_', '-')}"
        raise ConfigError(f"{option}: {exc.message}") from None
    refuse_existing(args.output, "-o", args.force)  # after the knobs: their errors first
    written = write_workload(args.output, trace.header, trace.sessions)
    print(f"wrote {plural(written.sessions, 'session')} to {args.output} "
          f"(fingerprint {written.fingerprint[:16]})")
    _generate_notes(written.params, args.max_context)
    return 0


def _generate_notes(params: dict[str, Any], max_context: int) -> None:
    """On stderr: the token scale applied and what the context cap changed."""
    scale = params.get("token_scale")
    if isinstance(scale, float) and scale < 1.0:
        print(f"note: token sizes scaled x{scale:.4g} to fit --max-context {max_context:,} "
              "(session shape kept: turns, think times, prefix reuse)", file=sys.stderr)
    compactions = params.get("compactions", 0)
    truncated = params.get("truncated_requests", 0)
    capped = params.get("outputs_capped", 0)
    if compactions or truncated or capped:
        print(f"note: the {max_context:,}-token cap compacted histories "
              f"{plural(compactions, 'time')} "
              f"({plural(params.get('sessions_compacted', 0), 'session')}), "
              f"truncated {plural(truncated, 'request input')} "
              f"and capped {plural(capped, 'output')} (counted in the header; "
              "see traces inspect)", file=sys.stderr)


_SESSION_FORMATS = ("tracelab", "weka")
_MIN_CONTEXT = 16
"""The smallest context a workload is fitted to (``traces generate`` refuses less too)."""


def _import(args: argparse.Namespace) -> int:
    from replay.cli._files import refuse_existing
    from replay.errors import ConfigError
    from traces import IMPORTERS, TraceError, token_scale_for, write_workload

    _positive(args.max_context, "--max-context")
    if args.max_context is not None and args.max_context < _MIN_CONTEXT:
        raise ConfigError(f"--max-context: must be >= {_MIN_CONTEXT} tokens (got "
                          f"{args.max_context}), as for traces generate")
    scale = args.token_scale
    if scale is None:
        scale = 1.0 if args.max_context is None else token_scale_for(args.max_context)
    elif not 0 < scale <= 1:
        raise ConfigError(f"--token-scale: must be in (0, 1], got {scale}")
    options: dict[str, Any] = {"max_context": args.max_context, "token_scale": scale}
    if args.format in _SESSION_FORMATS:
        options["dedupe"] = args.dedupe
    elif args.dedupe:
        raise ConfigError(f"--dedupe: {args.format} traces have no sessions to deduplicate")
    try:
        imported = IMPORTERS[args.format](args.path, **options)
    except TraceError as exc:
        if exc.file is None and exc.field:  # a bad option, not a bad file
            raise ConfigError(f"--{exc.field.replace('_', '-')}: {exc.message}") from None
        raise
    refuse_existing(args.output, "-o", args.force)  # after the options: their errors first
    written = write_workload(args.output, imported.header, imported.sessions)
    if scale < 1:
        print(f"note: token sizes scaled x{scale:.4g} (session shape kept: turns, think "
              "times, prefix reuse)", file=sys.stderr)
    counts = imported.counters.as_params()
    dupes = counts.pop("duplicate_sessions")
    changed = {k: v for k, v in counts.items() if v}
    note = f"; changed to fit: {changed}" if changed else ""
    print(f"wrote {plural(written.sessions, 'session')} to {args.output} "
          f"(fingerprint {written.fingerprint[:16]}){note}")
    if dupes:
        what = "dropped (--dedupe)" if args.dedupe else "kept (--dedupe drops them)"
        print(f"{plural(dupes, 'duplicate session')} (same content as an earlier one): "
              f"{what}")
    return 0


def _read_header(file: str) -> Any:
    """The workload's header; a raw trace given instead is refused with the
    ``traces import`` command that converts it."""
    import shlex

    from traces import TraceError, read_header, sniff_trace_format

    try:
        return read_header(file)
    except TraceError as exc:
        fmt = sniff_trace_format(file)
        if fmt is None:
            raise
        raise TraceError(f"{exc.message}; this looks like a raw {fmt} trace: convert it with "
                         f"`agentreplay traces import --format {fmt} {shlex.quote(file)} "
                         "-o workload.jsonl`",
                         file=exc.file, line=exc.line, field=exc.field) from None


def _inspect(args: argparse.Namespace) -> int:
    from traces import header_rows, inspect_sessions, iter_sessions, stats_rows

    header = _read_header(args.file)
    stats = inspect_sessions(iter_sessions(args.file))
    if args.json:
        import orjson

        doc = {"header": header.model_dump(mode="json"), "stats": stats.model_dump(mode="json")}
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{args.file}  ({header.source}, block {header.block_size}, "
                        f"fingerprint {header.fingerprint[:12]})")
    for col, justify in (("measure", "left"), ("p50", "right"), ("p90", "right"),
                         ("mean", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for row in stats_rows(stats):
        table.add_row(*row)
    for name, value in header_rows(header):
        table.add_row(name, value, "", "")
    Console().print(table)
    return 0


def _validate(args: argparse.Namespace) -> int:
    from traces import validate_workload

    _read_header(args.file)
    header = validate_workload(args.file)
    sessions = plural(header.sessions, "session")
    print(f"{args.file}: ok ({sessions}, fingerprint {header.fingerprint})")
    return 0
