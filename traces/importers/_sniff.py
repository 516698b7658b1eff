"""Recognise a raw trace by its first bytes, so that a command given one where a
workload belongs can name the importer to use instead of only refusing it."""

from __future__ import annotations

import os

import orjson

__all__ = ["sniff_trace_format"]

_HEAD_BYTES = 1 << 16


def sniff_trace_format(path: str | os.PathLike[str]) -> str | None:
    """The ``traces import --format`` a file looks like (``weka``, ``mooncake``,
    ``tracelab``, ``azure``), or None when it looks like none of them (or cannot be
    read). A guess from the first 64 KiB, only ever used for a hint."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_HEAD_BYTES)
    except OSError:
        return None
    text = head.lstrip()
    if text.upper().startswith(b"TIMESTAMP,") and b"ContextTokens" in text.split(b"\n", 1)[0]:
        return "azure"
    if not text.startswith(b"{"):
        return None
    first = text.split(b"\n", 1)[0]
    try:
        obj = orjson.loads(first)
    except orjson.JSONDecodeError:  # one large document (WEKA), cut off by the head
        obj = None
    keys = set(obj) if isinstance(obj, dict) else set()
    if obj is None and b'"requests"' in head and b'"hash_ids"' in head:
        return "weka"
    if {"requests", "block_size"} <= keys:
        return "weka"
    if {"input_length", "output_length"} <= keys:
        return "mooncake"
    if {"session_id", "round_index"} <= keys:
        return "tracelab"
    return None
