"""Experiment files: a comparison's whole command line as a TOML file a reviewer can read
and rerun (``compare --config FILE``, written by ``compare --save-config FILE`` and
stored as ``experiment.toml`` with the results).

Keys are the ``compare`` flags' names with underscores (``think_scale`` for
``--think-scale``); values have the flags' types, lists for repeatable flags
(``arm``, ``search``, ``slo``). On the command line, a flag whose value differs
from its default overrides the file. ``slo`` lists the SLO tiers the report of
the results uses. Unknown keys and wrong types are refused, naming the file and
key. Never holds an API key: only the name of the environment variable; a launched
server's secret arguments (``--api-key``, ``--hf-token``, tokens in
``--additional-config``) are written as ``***``, and a file holding ``***`` for one
is refused when read, naming the flag to give it after ``--``.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from analysis import REDACTED, public_url
from replay.ab._options import CompareOptions
from replay.ab._search_limits import SearchLimits
from replay.errors import ConfigError
from replay.knobs import experiment_types
from replay.servers.launch import LaunchSettings, redact_args

__all__ = ["EXPERIMENT_KEYS", "apply_experiment", "experiment_toml", "load_experiment"]

FORMAT_VERSION = 1
_LIST = (list,)
_OWN_KEYS: dict[str, tuple[type, ...]] = {
    "arm": _LIST, "workload": (str,), "out": (str,), "users": (str, int), "rate": (str,),
}
EXPERIMENT_KEYS: dict[str, tuple[type, ...]] = {
    **_OWN_KEYS, **experiment_types(CompareOptions),
    "launch": (bool,), **experiment_types(LaunchSettings), "vllm_args": _LIST,
    "search": _LIST, **experiment_types(SearchLimits), "slo": _LIST,
}
"""Key -> accepted TOML types (every key optional; required flags must come from
the file or the command line): the comparison's arms, workload and levels, every
knob of ``CompareOptions``, ``LaunchSettings`` and ``SearchLimits`` (derived from
their declarations), the vLLM arguments, search tiers and SLO tiers."""
_PATHS = ("workload", "out")


def load_experiment(path: str | os.PathLike[str], what: str = "--config") -> dict[str, Any]:
    """The file's settings, checked; relative paths are relative to the file. Errors
    name ``what`` (the flag, or the stored file's role) and the file."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"{what} {p}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        line = p.read_bytes()[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{what} {p}: line {line}: not UTF-8 text (byte "
                          f"0x{exc.object[exc.start]:02x}); save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} {p}: not valid TOML ({exc})") from None
    version = data.pop("format_version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise ConfigError(f"{what} {p}: format_version {version!r} is not supported "
                          f"(this agentreplay reads {FORMAT_VERSION})")
    for key, value in data.items():
        types = EXPERIMENT_KEYS.get(key)
        if types is None:
            raise ConfigError(f"{what} {p}: unknown key {key!r} (known: "
                              + ", ".join(sorted(EXPERIMENT_KEYS)) + ")")
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            want = " or ".join(t.__name__ for t in types)
            raise ConfigError(f"{what} {p}: {key} = {value!r} must be a {want}")
        if isinstance(value, list) and not all(isinstance(x, str) for x in value):
            raise ConfigError(f"{what} {p}: {key} must be a list of strings")
    for key in _PATHS:
        if key in data and not Path(data[key]).is_absolute():
            data[key] = str((p.parent / data[key]).resolve())
    if "users" in data:
        data["users"] = str(data["users"])
    return data


def apply_experiment(args: argparse.Namespace, defaults: Mapping[str, Any]) -> None:
    """Fill ``args`` from ``args.config``: the file's value wherever the command line
    did not type the flag (``args.typed``, from the CLI) and left it at its default."""
    data = load_experiment(args.config)
    typed: frozenset[str] = getattr(args, "typed", frozenset())
    for key, value in data.items():
        current = getattr(args, key, None)
        # nothing after -- parses as [] (its default is None): the file's vllm_args apply
        if key not in typed and (current == defaults.get(key) or
                                 (key == "vllm_args" and current in ([], ["--"]))):
            hidden = [i for i, v in enumerate(value) if REDACTED in str(v)] \
                if key == "vllm_args" else []
            if hidden:
                at = hidden[0]
                flag = (value[at - 1] if value[at] == REDACTED and at else
                        str(value[at]).partition("=")[0])
                raise ConfigError(f"--config {args.config}: vllm_args holds {flag} {REDACTED} "
                                  "(a secret is never written to a file); give the server's "
                                  f"arguments after -- on the command line, {flag} included")
            setattr(args, key, list(value) if isinstance(value, list) else value)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    text = str(v).replace("\\", "\\\\").replace('"', '\\"')
    # TOML basic strings hold no control character raw: C0 and DEL are escaped
    return '"' + "".join(c if " " <= c != "\x7f" else f"\\u{ord(c):04x}" for c in text) + '"'


def _public_arm(text: str) -> str:
    """An arm as stored: its URLs' ``user:password@`` removed (never written to a file;
    a server that needs them takes ``--api-key-env``)."""
    label, sep, urls = text.partition("=")
    if not sep:
        return text
    return label + "=" + ",".join(public_url(u) if u.strip() else u for u in urls.split(","))


def experiment_toml(args: argparse.Namespace, defaults: Mapping[str, Any]) -> str:
    """The command's settings as an experiment file (defaults omitted, paths absolute)."""
    lines = ["# agentreplay experiment: rerun with `agentreplay compare --config FILE`",
             "# (keys are the compare flags; a flag given on the command line overrides)",
             f"format_version = {FORMAT_VERSION}"]
    for key in EXPERIMENT_KEYS:
        value = getattr(args, key, None)
        if key == "vllm_args" and value and value[0] == "--":
            value = value[1:]
        if key == "vllm_args" and value:
            value = redact_args(value)  # the server's key or token: never in the file
        if value is None or value == defaults.get(key) or value == []:
            if key not in ("arm", "workload", "out", "duration"):
                continue
        if value is None:
            continue
        if key in _PATHS:
            value = str(Path(value).resolve())
        if key == "arm":
            value = [_public_arm(str(a)) for a in value]
        lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"
