"""Hypothesis strategies that damage files the way disks, editors and people do."""

from __future__ import annotations

import orjson
from hypothesis import strategies as st

__all__ = ["corrupt"]


def corrupt(data: st.DataObject, raw: bytes) -> bytes:
    """``raw`` truncated, bit-flipped, with bytes inserted or deleted, a line replaced,
    or one JSON field given a value of another type."""
    how = data.draw(st.sampled_from(["truncate", "flip", "insert", "replace_line",
                                     "delete", "garbage_field"]), label="how")
    if not raw:
        return data.draw(st.binary(max_size=40))
    i = data.draw(st.integers(0, len(raw) - 1), label="at")
    if how == "truncate":
        return raw[:i]
    if how == "flip":
        return raw[:i] + bytes([raw[i] ^ data.draw(st.integers(1, 255))]) + raw[i + 1:]
    if how == "insert":
        return raw[:i] + data.draw(st.binary(min_size=1, max_size=20)) + raw[i:]
    if how == "delete":
        j = data.draw(st.integers(i, len(raw)))
        return raw[:i] + raw[j:]
    lines = raw.split(b"\n")
    k = data.draw(st.integers(0, len(lines) - 1), label="line")
    if how == "replace_line":
        lines[k] = data.draw(st.one_of(st.binary(max_size=30), st.sampled_from(
            [b"{}", b"[]", b"null", b"1e999", b'{"id": 1}', b'"x"'])), label="line bytes")
        return b"\n".join(lines)
    try:
        obj = orjson.loads(lines[k])
    except orjson.JSONDecodeError:
        return raw
    if isinstance(obj, dict) and obj:
        key = data.draw(st.sampled_from(sorted(obj)), label="field")
        obj[key] = data.draw(st.one_of(
            st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.text(max_size=5),
            st.floats(allow_nan=False), st.lists(st.integers(), max_size=3),
            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)), label="value")
        lines[k] = orjson.dumps(obj, option=orjson.OPT_INDENT_2 if b"\n" in raw[:3] else 0)
    return b"\n".join(lines)
