"""Bounded memory on every input: line lengths and per-request token counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.cli import main
from traces import (
    MAX_LINE_BYTES,
    MAX_REQUEST_TOKENS,
    TraceError,
    import_azure,
    import_mooncake,
    import_tracelab,
    import_weka,
    iter_sessions,
    read_header,
)


def _drain(trace: object) -> None:
    for _ in getattr(trace, "sessions", trace):  # type: ignore[attr-defined]
        pass


def test_dev_zero_fails_fast_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traces", "inspect", "/dev/zero"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "/dev/zero:1" in err[0] and "longer than" in err[0]


def test_overlong_line_in_workload_and_traces(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"{" + b" " * (MAX_LINE_BYTES + 10) + b"}\n")
    for read in (read_header, lambda p: list(iter_sessions(p)),
                 lambda p: _drain(import_mooncake(p)), lambda p: _drain(import_tracelab(p)),
                 lambda p: _drain(import_azure(p))):
        with pytest.raises(TraceError) as info:
            read(big)
        assert info.value.line == 1 and "longer than" in info.value.message


@pytest.mark.parametrize("fmt", ["azure", "mooncake", "tracelab", "weka"])
def test_absurd_token_counts_name_file_line_field(tmp_path: Path, fmt: str) -> None:
    huge = 10**14
    path = tmp_path / f"t.{fmt}"
    if fmt == "azure":
        path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                        "2023-11-16 18:15:46.6805900,100,5\n"
                        f"2023-11-16 18:15:47.6805900,{huge},5\n")
        want = (3, "ContextTokens")
        load = import_azure
    elif fmt == "mooncake":
        path.write_text(json.dumps({"timestamp": 0, "input_length": 10, "output_length": huge,
                                    "hash_ids": [1]}) + "\n")
        want, load = (1, "output_length"), import_mooncake
    elif fmt == "tracelab":
        path.write_text(json.dumps({"session_id": "s", "round_index": 0,
                                    "input_tokens_total": huge, "output_tokens": 3}) + "\n")
        want, load = (1, "input_tokens_total"), import_tracelab
    else:
        path = tmp_path / "w.json"
        path.write_text(json.dumps({"id": "x", "requests": [
            {"t": 0, "in": huge, "out": 1, "hash_ids": list(range(3))}]}))
        want, load = (1, "requests.0.in"), import_weka
    with pytest.raises(TraceError) as info:
        _drain(load(path))
    assert (info.value.line, info.value.field) == want
    assert f"{MAX_REQUEST_TOKENS:,}" in info.value.message


def test_weka_import_of_dev_zero_fails_fast(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    out = tmp_path / "w.jsonl"
    assert main(["traces", "import", "--format", "weka", "/dev/zero", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "/dev/zero:1" in err[0]
