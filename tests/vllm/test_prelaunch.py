"""What a launched comparison reads before any server starts (no server here)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from replay.errors import ConfigError
from replay.servers.launch._model_files import max_model_len_arg, read_model_files, vllm_version
from replay.servers.launch._prelaunch import launch_facts
from traces import Request, Session, WorkloadHeader, write_workload


def _model(tmp_path: Path, vocab: int = 2048, tok_max: int = 2047, ctx: int = 8192) -> Path:
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps({"vocab_size": vocab,
                                               "max_position_embeddings": ctx}))
    (d / "tokenizer.json").write_text(json.dumps({
        "model": {"vocab": {"a": 0, "b": tok_max}}, "added_tokens": [{"id": 5}]}))
    (d / "model.safetensors").write_bytes(b"\0" * 64)
    return d


def _workload(path: Path, prompt: int) -> Path:
    reqs = (Request(prompt_tokens=prompt, output_tokens=10, new_block_ids=(1,)),)
    write_workload(path, WorkloadHeader(source="hand-built", seed=0, block_size=max(prompt, 1)),
                   [Session(id="s0", requests=reqs)])
    return path


def test_vocab_is_the_larger_of_config_and_tokenizer(tmp_path: Path) -> None:
    assert read_model_files(str(_model(tmp_path, vocab=2048, tok_max=2047))).vocab_size == 2048
    assert read_model_files(str(_model(tmp_path, vocab=100, tok_max=2999))).vocab_size == 3000
    assert read_model_files("org/hub-name") is None


def test_fingerprint_follows_file_content(tmp_path: Path) -> None:
    d = _model(tmp_path)
    first = read_model_files(str(d)).fingerprint
    assert read_model_files(str(d)).fingerprint == first
    (d / "config.json").write_text(json.dumps({"vocab_size": 2048, "num_hidden_layers": 3}))
    assert read_model_files(str(d)).fingerprint != first


def test_max_model_len_argument_forms() -> None:
    assert max_model_len_arg(["--max-model-len", "4096"]) == 4096
    assert max_model_len_arg(["--max-model-len=8k"]) == 8000
    assert max_model_len_arg(["--max-model-len", "1K"]) == 1024
    assert max_model_len_arg(["--enforce-eager"]) is None


def test_too_long_workload_is_refused_before_launch(tmp_path: Path) -> None:
    d = _model(tmp_path)
    wl = _workload(tmp_path / "w.jsonl", 5000)
    with pytest.raises(ConfigError, match="max_model_len 4096 \\(--max-model-len\\)"):
        launch_facts(str(d), (sys.executable, "-m", "x"), ["--max-model-len", "4096"], wl, None)
    with pytest.raises(ConfigError, match="max_position_embeddings"):
        launch_facts(str(_model(tmp_path, ctx=2048)), (sys.executable, "-m", "x"), [], wl, None)


@pytest.mark.cli
def test_facts_and_their_resume_settings(tmp_path: Path) -> None:
    d = _model(tmp_path)
    wl = _workload(tmp_path / "w.jsonl", 100)
    facts = launch_facts(str(d), (sys.executable, "-m", "x"), ["--max-num-seqs", "4"], wl, None)
    assert (facts.vocab_size, facts.max_model_len) == (2048, 8192)
    assert launch_facts(str(d), (sys.executable, "-m", "x"), [], wl, 999).vocab_size == 999
    settings = facts.settings(["--max-num-seqs", "4"])
    assert settings["launch_vllm_args"] == ["--max-num-seqs", "4"]
    assert settings["launch_model"] == str(d.resolve())
    assert settings["launch_model_fingerprint"] == read_model_files(str(d)).fingerprint
    assert facts.vllm_version == vllm_version((sys.executable, "-m", "x"))


@pytest.mark.cli
def test_vllm_version_from_a_launcher_script(tmp_path: Path) -> None:
    script = tmp_path / "vllm"
    script.write_text(f"#!{sys.executable}\n")
    assert vllm_version((str(script), "serve")) == vllm_version((sys.executable, "-m", "x"))
    assert vllm_version((str(tmp_path / "missing"), "serve")) is None
