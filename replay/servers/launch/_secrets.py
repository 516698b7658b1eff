"""A launched server's secrets, kept out of everything the tool writes.

``compare --launch ... -- --api-key KEY`` hands vLLM its key (or ``--hf-token``, a
token inside ``--additional-config``, ``HF_TOKEN`` in the environment). The server
needs them; the results do not: the experiment file, ``comparison.json``, the
server log's header and what the server itself prints (vLLM logs its non-default
arguments) hold ``***`` instead. Which names are secret is decided once
(:func:`analysis.is_secret_name`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from analysis import REDACTED, is_secret_name, scrub_secrets

__all__ = ["redact_args", "scrub_file", "secret_values"]

_MIN_SECRET = 8
"""Shorter values are not searched for in logs (``true`` would be replaced everywhere)."""


def _walk(tree: object, found: list[str]) -> object:
    if isinstance(tree, dict):
        out: dict[object, object] = {}
        for k, v in tree.items():
            if isinstance(k, str) and is_secret_name(k) and isinstance(v, str | int | float) \
                    and not isinstance(v, bool):
                found.append(str(v))
                out[k] = REDACTED
            else:
                out[k] = _walk(v, found)
        return out
    if isinstance(tree, list):
        return [_walk(v, found) for v in tree]
    return tree


def _split(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the args with secrets replaced, the secret values found)."""
    shown: list[str] = []
    found: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next and not arg.startswith("--"):
            found.append(arg)
            shown.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        name, eq, value = arg.partition("=")
        if arg.startswith("-") and is_secret_name(name):
            if eq:
                found.append(value)
                shown.append(f"{name}={REDACTED}")
            else:
                shown.append(arg)
                hide_next = True
            continue
        if arg.lstrip().startswith(("{", "[")):
            with contextlib.suppress(ValueError):
                shown.append(json.dumps(_walk(json.loads(arg), found)))
                continue
        if "=" in arg and not arg.startswith("-") and is_secret_name(name):
            found.append(value)  # NAME=VALUE (an environment setting)
            shown.append(f"{name}={REDACTED}")
            continue
        scrubbed = scrub_secrets(arg)
        if scrubbed != arg:
            found.append(arg)
        shown.append(scrubbed)
    return shown, found


def redact_args(args: Sequence[str]) -> list[str]:
    """``args`` as written to a file or shown: the value of every secret-looking flag
    (``--api-key K``, ``--hf-token=K``), JSON key (in ``--additional-config``) or
    ``NAME=VALUE`` replaced by ``***``, and URLs without their user info."""
    return _split(args)[0]


def secret_values(args: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """The secrets a server was given (its arguments', and its environment's variables
    named like secrets: ``*_KEY``, ``*_TOKEN``), longest first, to scrub from its log."""
    found = _split(args)[1]
    found += [v for k, v in (env or {}).items() if is_secret_name(k)]
    return sorted({v for v in found if len(v) >= _MIN_SECRET}, key=len, reverse=True)


def scrub_file(path: Path, secrets: Sequence[str]) -> None:
    """Replace every one of ``secrets`` in the text file ``path`` by ``***`` (a server
    log, once the server stopped). A file that cannot be read or written is left."""
    if not secrets:
        return
    try:
        data = path.read_bytes()
    except OSError:
        return
    clean = data
    for secret in secrets:
        clean = clean.replace(secret.encode(), REDACTED.encode())
    if clean != data:
        with contextlib.suppress(OSError):
            path.write_bytes(clean)
