"""Issue 38 item 11: a launched server's secrets are in no file the tool writes and no
page it renders.

``compare --launch ... -- --api-key KEY`` wrote KEY into ``--save-config``'s file,
into ``OUT/experiment.toml`` and ``comparison.json``, and ``report OUT`` showed it.
Here a stand-in for vLLM's python is given a key, a token (``--hf-token=``), a token
inside ``--additional-config`` and ``HF_TOKEN`` in its environment, and prints
them all as vLLM prints its non-default arguments; then every file under the
comparison directory, the saved experiment file and the report are searched for
each secret. (A searched comparison's files are searched for an arm URL's
password in ``test_search_state.py``.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from analysis import is_secret_name, scrub_secrets
from replay.cli import main
from replay.servers.launch import redact_args, secret_values
from replay.servers.sim import free_port
from tests.replay.conftest import make_workload

_KEY, _TOKEN, _CONFIG_TOKEN, _ENV_TOKEN = (
    "sk-planted-key-38a", "hf-planted-token-38b", "planted-config-38c", "planted-env-38d")
_SECRETS = (_KEY, _TOKEN, _CONFIG_TOKEN, _ENV_TOKEN)

FAKE = r'''#!{python}
import json, os, sys
argv = sys.argv[3:]
if "--port" not in argv:  # asked for its version
    print("0.0.0+fake")
    sys.exit(0)
print("non-default args:", argv, "HF_TOKEN =", os.environ.get("HF_TOKEN"), flush=True)
opt = {{argv[i]: argv[i + 1] for i in range(0, len(argv) - 1) if argv[i].startswith("--")}}
backend = json.loads(opt["--additional-config"])["decode_backend"]
os.execv(sys.executable, [sys.executable, "-m", "replay.cli", "serve-sim", "--profile",
         "small", "--backend", backend, "--port", opt["--port"], "--time-scale", "4"])
'''


def _vllm_args() -> list[str]:
    return ["--", "--api-key", _KEY, f"--hf-token={_TOKEN}", "--max-num-batched-tokens", "512",
            "--additional-config", json.dumps({"hf_token": _CONFIG_TOKEN})]


def _argv(tmp: Path, out: Path) -> list[str]:
    fake = tmp / "fake-vllm-python"
    fake.write_text(FAKE.format(python=sys.executable))
    fake.chmod(0o755)
    (tmp / "model").mkdir(exist_ok=True)
    wl = make_workload(tmp / "wl.jsonl", sessions=1, turns=2, output=4, think_s=0.0)
    return ["compare", "--launch", "--model", str(tmp / "model"), "--vllm-python", str(fake),
            "--port", str(free_port()), "--arm", "auto", "--arm", "latency_specialized",
            "--workload", str(wl), "--users", "1", "--duration", "1", "--warmup", "0.2",
            "--drain", "2", "--out", str(out), "--quiet", *_vllm_args()]


def _leaks(root: Path) -> list[tuple[str, str]]:
    files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
    return [(str(p), s) for p in files for s in _SECRETS if s.encode() in p.read_bytes()]


@pytest.mark.sim
def test_a_launched_comparison_writes_no_server_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HF_TOKEN", _ENV_TOKEN)
    out = tmp_path / "cmp"
    code = main(_argv(tmp_path, out))
    err = capsys.readouterr().err
    assert code in (0, 3), err  # 3: a starved simulator stamped a run invalid
    logs = list((out / "logs").iterdir())
    assert logs, "the servers' logs are kept"
    # the stand-in did print its secrets; the kept log says *** where they were
    assert all("non-default args:" in p.read_text() for p in logs)
    assert all("***" in p.read_text() for p in logs)
    assert "512" in (out / "experiment.toml").read_text()  # other arguments are kept
    assert main(["report", str(out)]) in (0, 3)
    assert (out / "report.html").is_file()
    assert _leaks(out) == []
    assert all(s not in err for s in _SECRETS)


@pytest.mark.sim
def test_save_config_writes_no_server_secret_and_its_file_is_not_rerun_blind(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "exp.toml"
    argv = _argv(tmp_path, tmp_path / "cmp")
    at = argv.index("--")
    assert main([*argv[:at], "--save-config", str(saved), *argv[at:]]) == 0
    capsys.readouterr()
    assert _leaks(saved) == []
    text = saved.read_text()
    assert "--api-key" in text and "***" in text
    # rerunning the file would start the server with the key ***: refused, naming it
    assert main(["compare", "--config", str(saved)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--api-key" in err and "after --" in err, err
    assert not (tmp_path / "cmp").exists()


def test_launch_dry_run_prints_no_secret(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "model").mkdir()
    code = main(["launch", "--model", str(tmp_path / "model"), "--arm", "auto",
                 "--dry-run", *_vllm_args()])
    seen = capsys.readouterr()
    assert code == 0, seen.err
    assert "--api-key" in seen.out and "512" in seen.out
    assert all(s not in seen.out + seen.err for s in _SECRETS)


@pytest.mark.parametrize(("text", "kept"), [
    ('vllm_args = ["--api-key", "S3CRET", "--max-num-batched-tokens", "8192"]', "8192"),
    ("--hf-token=S3CRET --tokenizer t", "--tokenizer t"),
    ("--max-num-batched-tokens 8192 --api-key S3CRET", "--max-num-batched-tokens 8192"),
    ('--additional-config "{\\"hf_token\\": \\"S3CRET\\"}"', "hf_token"),
    ("non-default args: {'api_key': ['S3CRET'], 'model': 'm'}", "'model': 'm'"),
    ("HF_TOKEN=S3CRET OPENAI_API_KEY=S3CRET vllm serve", "vllm serve"),
    ("http://bob:S3CRET@127.0.0.1:8000/v1", "127.0.0.1:8000"),
])
def test_text_scrubbing_hides_values_and_keeps_the_rest(text: str, kept: str) -> None:
    clean = scrub_secrets(text)
    assert "S3CRET" not in clean and kept in clean


def test_secret_names_are_told_by_whole_words() -> None:
    for name in ("--api-key", "--hf-token", "HF_TOKEN", "OPENAI_API_KEY", "password"):
        assert is_secret_name(name), name
    for name in ("--max-num-batched-tokens", "--tokenizer", "--api-key-env", "--keyfile",
                 "--model"):
        assert not is_secret_name(name), name
    args = ["--api-key", "k1-long-secret", "--port", "8000", "--hf-token=t1-long-secret"]
    assert redact_args(args) == ["--api-key", "***", "--port", "8000", "--hf-token=***"]
    assert set(secret_values(args, {"HF_TOKEN": "e1-long-secret", "PATH": "/usr/bin"})) == {
        "k1-long-secret", "t1-long-secret", "e1-long-secret"}
