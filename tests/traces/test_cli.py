"""``agentreplay traces ...`` through the real dispatcher: exit codes and messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.cli import main
from traces import generate, iter_sessions, read_header


def test_generate_validate_inspect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "w.jsonl"
    rc = main(["traces", "generate", "--profile", "coding-agent", "--sessions", "12",
               "--seed", "7", "--max-context", "32768", "--block-size", "32",
               "--prompt-scale", "0.1", "--think-scale", "0.5", "-o", str(out)])
    assert rc == 0
    head = read_header(out)
    assert (head.sessions, head.seed, head.block_size, head.max_context) == (12, 7, 32, 32768)
    _, expected = generate(sessions=12, seed=7, max_context=32768, block_size=32,
                           prompt_scale=0.1, think_scale=0.5)
    assert list(iter_sessions(out)) == list(expected)
    capsys.readouterr()
    assert main(["traces", "validate", str(out)]) == 0
    assert head.fingerprint in capsys.readouterr().out
    assert main(["traces", "inspect", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stats"]["sessions"] == 12
    assert doc["header"]["fingerprint"] == head.fingerprint
    assert main(["traces", "inspect", str(out)]) == 0
    assert "prefix reuse" in capsys.readouterr().out


def test_import_each_format(sample_traces: Path, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    cases = {
        "weka": sample_traces / "weka",
        "mooncake": sample_traces / "mooncake" / "synthetic_trace.jsonl",
        "azure": sample_traces / "azure" / "AzureLLMInferenceTrace_code.csv",
        "tracelab": sample_traces / "tracelab" / "round_trace.jsonl",
    }
    for fmt, path in cases.items():
        out = tmp_path / f"{fmt}.jsonl"
        assert main(["traces", "import", "--format", fmt, str(path), "-o", str(out)]) == 0
        assert read_header(out).source == fmt
        assert main(["traces", "validate", str(out)]) == 0
    out = tmp_path / "capped.jsonl"
    assert main(["traces", "import", "--format", "weka", str(cases["weka"]), "-o", str(out),
                 "--max-context", "65536", "--token-scale", "1"]) == 0
    assert "compactions" in capsys.readouterr().out
    assert read_header(out).params["compactions"] >= 1


def test_bad_files_exit_2_with_one_clear_line(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("")
    assert main(["traces", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "Traceback" not in err

    trace = tmp_path / "m.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 5, "output_length": "x", '
                     '"hash_ids": [1]}\n')
    assert main(["traces", "import", "--format", "mooncake", str(trace), "-o",
                 str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{trace}:1: field 'output_length'" in err
    assert not (tmp_path / "o.jsonl").exists()

    assert main(["traces", "inspect", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err


def test_bad_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "w.jsonl")
    assert main(["traces", "generate", "--sessions", "3", "--max-context", "0",
                 "-o", out]) == 2
    assert "--max-context" in capsys.readouterr().err
    assert main(["traces", "generate", "--sessions", "3", "--profile", "nope", "-o", out]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["traces", "generate", "--sessions", "3", "--prompt-scale", "-1",
                 "-o", out]) == 2
    assert "--prompt-scale" in capsys.readouterr().err
    assert main(["traces", "generate", "--sessions", "3",
                 "-o", str(tmp_path / "no" / "such" / "dir.jsonl")]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert main(["traces"]) == 2


def test_generate_any_context_states_the_scale(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "small.jsonl"
    assert main(["traces", "generate", "--sessions", "30", "--max-context", "4096",
                 "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "scaled x0.02048" in err and "cap compacted" in err
    head = read_header(out)
    assert head.params["token_scale"] == pytest.approx(4096 / 200_000)
    assert all(r.prompt_tokens + r.output_tokens <= 4096
               for s in iter_sessions(out) for r in s.requests)
    assert main(["traces", "inspect", str(out)]) == 0
    assert "compactions forced by the cap" in capsys.readouterr().out


def test_generate_decode_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "decode.jsonl"
    assert main(["traces", "generate", "--profile", "decode", "--sessions", "4",
                 "--output-tokens", "200", "-o", str(out)]) == 0
    head = read_header(out)
    assert head.params["profile"] == "decode" and head.params["ignore_eos"] is True
    assert [(r.prompt_tokens, r.output_tokens) for s in iter_sessions(out)
            for r in s.requests] == [(1, 200)] * 4
    assert main(["traces", "generate", "--profile", "decode", "--sessions", "1",
                 "--input-tokens", "0", "-o", str(out)]) == 2
    assert "--input-tokens" in capsys.readouterr().err


def test_import_scales_to_the_context(sample_traces: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "small.jsonl"
    assert main(["traces", "import", "--format", "weka", str(sample_traces / "weka"),
                 "-o", str(out), "--max-context", "4096"]) == 0
    assert "scaled x0.02048" in capsys.readouterr().err
    assert read_header(out).params["token_scale"] == pytest.approx(4096 / 200_000)
    assert all(r.prompt_tokens + r.output_tokens <= 4096
               for s in iter_sessions(out) for r in s.requests)
    assert main(["traces", "import", "--format", "weka", str(sample_traces / "weka"),
                 "-o", str(out), "--token-scale", "2"]) == 2
    assert "--token-scale" in capsys.readouterr().err
