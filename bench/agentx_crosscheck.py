"""AgentX cross-check: AIPerf 0.13's AgentX scenario and agentreplay, same simulated server.

Both tools replay the same WEKA sessions (the shared sample, or any directory given)
against ``serve-sim`` with the same profile and backend, one fresh server each (cold
cache, counters from zero): agentreplay enters AIPerf's lanes (each lane's trace and
first profiling turn, read from AIPerf's log, as ``run --entry``), and AIPerf loads a
tokenizer that splits text as the simulator does, so both send the same requests at
the same prompt lengths as the server counts them. Both read the sessions with each
subagent's times rewritten in the absolute shape (``absolute_weka``): AIPerf 0.13 reads
the sample's relative shape as if a subagent's finish were its spawn, so it replayed
other subagent timing than the recording's (``--weka-shape as-is`` shows that). The
script prints their figures side by side: requests
measured, P90 interactivity (1 / P90 of per-request TPOT: the slow tail), TTFT P50/P90,
and the prefix-hit share, plus the simulator's own truth for each run (its truth log:
mean TPOT it delivered, its lateness), then the subagent requests each measured (keyed
by session, agent and turn on both sides) and P90 interactivity and ITL over the
requests both measured. Which token count each tool used is printed
too (AIPerf runs with ``--use-server-token-count``, as InferenceX does; agentreplay
always takes the server's ``usage``).

AIPerf runs ``--scenario inferencex-agentx-mvp --unsafe-override`` (the scenario wants
>= 900 s; a shorter run is stamped ``submission_valid=false``) with InferenceX's flags
(``--random-seed 42 --failed-request-threshold 0.05 --trajectory-start-min-ratio 0.25
--trajectory-start-max-ratio 0.75``). agentreplay runs ``--scenario agentx-mvp``.
``--rules v1`` checks the agentx-harness 1.0.x rules instead: AIPerf adds
``--warmup-requests-per-lane 10 --trace-idle-gap-cap-seconds 300`` and a 0.10 failure
threshold, agentreplay runs ``--scenario agentx-v1``. Differences are explained in
bench/README.md ("AgentX cross-check").

The WEKA sample holds requests longer than Kimi K3's 262,144-token context; AgentX
forbids truncation, so the server's ``max_model_len`` is widened to its whole KV
cache (4,194,304 tokens) for both tools alike.

    python bench/agentx_crosscheck.py [--weka DIR] [--concurrency 1] [--duration 60]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:  # the checkout's packages, whatever the install state
    sys.path.insert(0, str(REPO))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
import orjson  # noqa: E402
from peers import PEERS_DIR, ensure_tool  # noqa: E402

from replay.client import parse_prometheus  # noqa: E402
from replay.servers.sim import SimServerProcess, load_profile  # noqa: E402

WEKA = REPO.parent / "shared" / "traces" / "weka"
if not WEKA.is_dir():  # a user's clone has no ../shared: the sample copied for the tests
    WEKA = REPO / "tests" / "fixtures" / "traces" / "weka"
SCENARIO = "inferencex-agentx-mvp"
IDLE_GAP_CAP_S = 10.0
"""The scenario's ``system_idle_gap_cap_seconds``."""
START_RATIOS = (0.25, 0.75)
"""InferenceX's ``--trajectory-start-min/max-ratio``."""


Key = tuple[str, str, int]
"""A request of the workload: (session, subagent id or "" for the main session, turn)."""


@dataclass(frozen=True)
class Timing:
    """One measured request's decode timing, from the tool's own record."""

    tpot_ms: float | None
    """(last token - first token) / (tokens - 1); None under 2 tokens."""
    gaps_ms: tuple[float, ...]
    """Gap before each streamed token after the first (a chunk of k tokens: k gaps of
    gap/k, as ``analysis``'s ITL; AIPerf's ``inter_chunk_latency`` as it lists them)."""
    request_id: str = ""
    """The ``X-Request-Id`` it was sent with: its line in the simulator's truth log."""


@dataclass
class Figures:
    """One tool's figures for the side-by-side table (None: the tool did not report it)."""

    requests: float | None = None
    p90_interactivity: float | None = None
    ttft_p50_s: float | None = None
    ttft_p90_s: float | None = None
    itl_p50_ms: float | None = None
    itl_mean_ms: float | None = None
    prefix_share: float | None = None
    prefix_share_server: float | None = None
    truth_requests: int | None = None
    truth_prompt_tokens: float | None = None
    truth_tpot_ms: float | None = None
    sim_lateness: float | None = None
    token_count: str = ""
    note: str = ""
    measured: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    """(session, turn) -> (prompt, output tokens as the server counted them) of each
    measured main-session request that completed (the tool's own records)."""
    timings: dict[Key, Timing] = field(default_factory=dict)
    """(session, agent or "", turn) -> its TPOT and ITL gaps, of every measured request
    that completed, subagents' too (a request replayed twice: its last replay)."""
    subagent_requests: int | None = None
    """Measured subagent requests that completed, each replay counted."""
    truth_tpots: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Request id -> (TPOT the simulator delivered, TPOT its profile says), ms, from
    its truth log: what the server did, apart from how the tool timed it."""


# -- the simulated server ---------------------------------------------------------
def wide_profile(name: str, out: Path) -> Path:
    """The profile with ``max_model_len`` widened to its whole KV cache (no truncation)."""
    base = load_profile(name)
    wide = base.model_copy(update={"max_model_len": base.num_gpu_blocks * base.block_size})
    path = out / f"{base.name}-wide.json"
    path.write_text(wide.model_dump_json(indent=2))
    return path


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return {**parse_prometheus(text), **parse_prometheus(text, prefix="vllm_sim:")}


def truth_figures(truth: Path, fig: Figures) -> None:
    """What the server delivered: request count, mean prompt length as the server counted
    it (AIPerf sends text, which the simulator's tokenizer counts its own way), and mean
    TPOT by its own clock."""
    tpots = []
    prompts = []
    n = 0
    for line in truth.read_bytes().splitlines():
        rec = orjson.loads(line)
        if rec["status"] != "ok":
            continue
        n += 1
        prompts.append(rec["prompt_tokens"])
        if rec["output_tokens"] >= 2:
            tpots.append((rec["emit_ns"][-1] - rec["emit_ns"][0]) / 1e6
                         / (rec["output_tokens"] - 1))
    fig.truth_requests = n
    fig.truth_tpots = truth_tpots(truth.read_bytes().splitlines())
    fig.truth_prompt_tokens = float(np.mean(prompts)) if prompts else None
    fig.truth_tpot_ms = float(np.mean(tpots)) if tpots else None


def truth_tpots(lines: Sequence[bytes]) -> dict[str, tuple[float, float]]:
    """Per request of the truth log (2+ tokens): the TPOT the simulator delivered (first
    to last emit) and the one its profile gives for those decode steps (no lateness)."""
    out: dict[str, tuple[float, float]] = {}
    for line in lines:
        rec = orjson.loads(line)
        n = rec.get("output_tokens") or 0
        if rec.get("status") != "ok" or n < 2 or len(rec.get("emit_ns") or ()) < 2:
            continue
        emit, model = rec["emit_ns"], rec.get("step_model_ns") or []
        tokens = sum((rec.get("emit_tokens") or [])[1:]) or n - 1
        out[rec["request_id"]] = ((emit[-1] - emit[0]) / 1e6 / (n - 1),
                                  sum(model[1:]) / 1e6 / tokens)
    return out


def served(profile: Path, backend: str, work: Path, fig: Figures,
           run: Callable[[str], None]) -> None:
    """Run ``run(url)`` against a fresh simulator and fill the server-side figures."""
    truth = work / "truth.jsonl"
    with SimServerProcess(str(profile), backend, truth_path=str(truth)) as srv:
        before = scrape(srv.url)
        run(srv.url)
        after = scrape(srv.url)

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    queries = delta("vllm:prefix_cache_queries_total")
    if queries:
        fig.prefix_share_server = delta("vllm:prefix_cache_hits_total") / queries
    model = delta("vllm_sim:engine_step_model_seconds_total")
    if model:
        fig.sim_lateness = delta("vllm_sim:engine_step_actual_seconds_total") / model - 1
    truth_figures(truth, fig)


# -- AIPerf -----------------------------------------------------------------------
_WORD_TOKENIZER = r'''
import json, re, sys
from pathlib import Path
import aiperf
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
piece = re.compile(r"\w+|[^\w\s]")
text = (Path(aiperf.__file__).parent / "dataset/generator/assets/shakespeare.txt").read_text()
words = ["zzunk", "zzbos", "zzeos"] + sorted(set(piece.findall(text)))
tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="zzunk"))
tok.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.WhitespaceSplit(),
    pre_tokenizers.Split(Regex(r"\w+|[^\w\s]"), behavior="isolated")])
tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins with single spaces
out = sys.argv[1]
tok.save(out + "/tokenizer.json")
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "zzbos",
           "eos_token": "zzeos", "unk_token": "zzunk", "model_max_length": 1 << 24},
          open(out + "/tokenizer_config.json", "w"))
json.dump({"model_type": "llama", "vocab_size": len(words)}, open(out + "/config.json", "w"))
'''


def sim_word_tokenizer() -> Path:
    """A tokenizer that splits text as the simulator's does (words and single symbols,
    ``replay.servers.sim._tokenizer``; its vocabulary: AIPerf's prompt corpus, anything
    else one unknown-word token), so every token of the prompts AIPerf builds to the
    trace's counts is one token to the simulator too (the tiny Llama's sub-word text
    reached it ~2.3x shorter). Made once with AIPerf's own ``tokenizers``."""
    out = PEERS_DIR / "sim-split-tokenizer"
    if not (out / "tokenizer.json").exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(PEERS_DIR / "aiperf" / "bin" / "python"), "-c", _WORD_TOKENIZER,
                        str(out)], check=True)
    return out


def aiperf_command(url: str, model: str, args: argparse.Namespace, tokenizer: Path,
                   art: Path) -> list[str]:
    return [
        str(PEERS_DIR / "aiperf" / "bin" / "aiperf"), "profile", "--scenario", SCENARIO,
        "--unsafe-override", "--url", url, "--endpoint-type", "chat", "--streaming",
        "--model", model, "--tokenizer", str(tokenizer),
        "--custom-dataset-type", "weka_trace", "--input-file", str(args.weka),
        "--concurrency", str(args.concurrency),
        "--benchmark-duration", str(args.duration),
        "--benchmark-grace-period", str(args.grace),
        "--use-server-token-count", "--extra-inputs", "ignore_eos:true",
        "--random-seed", "42",
        "--failed-request-threshold", "0.10" if args.rules == "v1" else "0.05",
        "--trajectory-start-min-ratio", str(START_RATIOS[0]),
        "--trajectory-start-max-ratio", str(START_RATIOS[1]),
        "--artifact-dir", str(art), "--ui-type", "none", "--no-gpu-telemetry",
        *(["--trace-idle-gap-cap-seconds", "300"] if args.rules == "v1" else []),
        *(["--warmup-requests-per-lane", "10"]
          if args.rules == "v1" and aiperf_has("--warmup-requests-per-lane") else []),
    ]


def aiperf_has(flag: str) -> bool:
    """Whether the installed AIPerf takes ``flag`` (0.13.0 has no
    ``--warmup-requests-per-lane``: it primes each lane with one request that carries
    the whole history before the entry point)."""
    out = subprocess.run([str(PEERS_DIR / "aiperf" / "bin" / "aiperf"), "profile", "--help"],
                         capture_output=True, text=True, env=_aiperf_env())
    return flag in out.stdout


def _stat(data: dict[str, object], name: str, key: str) -> float | None:
    entry = data.get(name)
    if isinstance(entry, dict):
        value = entry.get(key)
        return float(value) if isinstance(value, int | float) else None
    return None


def parse_aiperf(data: dict[str, object], fig: Figures) -> None:
    """``profile_export_aiperf.json``: its ITL is per-request (E2E - TTFT) / (tokens - 1),
    i.e. TPOT, so 1000 / P90(ITL in ms) is the same slow-tail P90 interactivity."""
    fig.requests = _stat(data, "request_count", "avg")
    itl_p90 = _stat(data, "inter_token_latency", "p90")
    unit = data.get("inter_token_latency", {})
    scale = 1e-3 if isinstance(unit, dict) and unit.get("unit", "ms") == "ms" else 1.0
    if itl_p90:
        fig.p90_interactivity = 1.0 / (itl_p90 * scale)
    ttft_unit = data.get("time_to_first_token", {})
    tscale = 1e-3 if isinstance(ttft_unit, dict) and ttft_unit.get("unit", "ms") == "ms" else 1.0
    for attr, key in (("ttft_p50_s", "p50"), ("ttft_p90_s", "p90")):
        v = _stat(data, "time_to_first_token", key)
        setattr(fig, attr, None if v is None else v * tscale)
    # the gap between streamed chunks (AIPerf's inter_chunk_latency, ms) is our ITL
    fig.itl_p50_ms = _stat(data, "inter_chunk_latency", "p50")
    fig.itl_mean_ms = _stat(data, "inter_chunk_latency", "avg")
    fig.token_count = "server usage (--use-server-token-count)"


def run_aiperf(url: str, model: str, args: argparse.Namespace, tokenizer: Path,
               work: Path, fig: Figures) -> None:
    art = work / "artifacts"
    cmd = aiperf_command(url, model, args, tokenizer, art)
    (work / "command.txt").write_text(" ".join(cmd) + "\n")
    with open(work / "aiperf.log", "wb") as log:
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                              env=_aiperf_env(), cwd=work).returncode
    if code != 0 or not read_aiperf(art, fig):
        fig.note = f"aiperf exited {code}; see {work / 'aiperf.log'}"


def read_aiperf(art: Path, fig: Figures) -> bool:
    """Fill ``fig`` from an AIPerf run's artifacts; False when it left none."""
    found = sorted(art.rglob("profile_export_aiperf.json"))
    if not found:
        return False
    parse_aiperf(json.loads(found[-1].read_text()), fig)
    records = found[-1].with_name("profile_export.jsonl")
    if records.exists():
        lines = records.read_bytes().splitlines()
        fig.measured = aiperf_measured(lines)
        fig.timings, fig.subagent_requests = aiperf_timings(lines)
    metrics = found[-1].with_name("server_metrics_export.json")
    if metrics.exists():
        fig.prefix_share = aiperf_prefix_share(json.loads(metrics.read_text()))
    return True


def aiperf_prefix_share(data: dict[str, object]) -> float | None:
    """Hits / queries over AIPerf's profiling phase (its ``/metrics`` scrapes: each
    counter's ``total`` is its increase over the phase)."""
    metrics = data.get("metrics")
    if not isinstance(metrics, dict):
        return None

    def total(name: str) -> float:
        series = metrics.get(name, {}).get("series") or [{}]
        return float(sum((s.get("stats") or {}).get("total", 0.0) for s in series))

    queries = total("vllm:prefix_cache_queries")
    return total("vllm:prefix_cache_hits") / queries if queries else None


_LANE = re.compile(r"lane=(\d+)\s.*?(root_next|start_turn)=\s*(\d+)/\s*\d+"
                   r".*?trace_id=(\S+)")


def aiperf_lanes(log_text: str) -> list[str]:
    """``SESSION:TURN`` per lane, in lane order, from the table AIPerf logs when it builds
    its trajectories (``TrajectorySource``): a timestamped trace's ``root_next`` is the
    first root turn at or after its sampled t*, its first profiling turn; a trace
    without timestamps logs ``start_turn``, its warmup turn, and profiles from the next.
    The table is logged once; a lane seen again keeps its first line."""
    lanes: dict[int, str] = {}
    for m in _LANE.finditer(log_text):
        turn = int(m.group(3)) + (m.group(2) == "start_turn")
        lanes.setdefault(int(m.group(1)), f"{m.group(4)}:{turn}")
    return [lanes[k] for k in sorted(lanes)]


def _aiperf_env() -> dict[str, str]:
    # AIPerf rejects a local tokenizer path while HF_HUB_OFFLINE=1 is set (as peers.py)
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    return dict(env, TQDM_DISABLE="1", PYTHONUNBUFFERED="1")


# -- agentreplay ------------------------------------------------------------------
def _cli(*argv: str, log: Path | None = None) -> int:
    cmd = [sys.executable, "-m", "replay.cli", *argv]
    if log is None:
        return subprocess.run(cmd).returncode
    with open(log, "ab") as fh:
        fh.write((" ".join(cmd) + "\n").encode())
        fh.flush()
        return subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT).returncode


def has_scenario_preset() -> bool:
    out = subprocess.run([sys.executable, "-m", "replay.cli", "run", "--help"],
                         capture_output=True, text=True)
    return "--scenario" in out.stdout


def agentreplay_flags(args: argparse.Namespace, preset: bool,
                      entries: Sequence[str] = ()) -> list[str]:
    """The AgentX rules as agentreplay flags: the preset, or its nearest equivalent;
    ``entries`` pin each user's first session and entry turn (``--entry``: AIPerf's
    lanes), which the preset takes only with ``--scenario-unsafe``."""
    load = ["--users", str(args.concurrency), "--duration", str(args.duration),
            "--warmup", str(args.warmup), "--drain", str(args.grace), "--seed", "42"]
    if preset:
        # like AIPerf's --unsafe-override: a run under 900 s is stamped not satisfied
        name = "agentx-v1" if args.rules == "v1" else "agentx-mvp"
        short = args.duration < (3600 if args.rules == "v1" else 900)
        unsafe = ["--scenario-unsafe"] if short or entries else []
        pins = [f for e in entries for f in ("--entry", e)]
        return ["--scenario", name, *unsafe, *pins, *load]
    # streaming, ignore_eos and the server's usage are how agentreplay always runs;
    # warmup starts users part-way into their sessions; a per-user salt busts the cache
    # after the shared prefix; think times capped per user
    return [*load, "--think-time-cap", str(IDLE_GAP_CAP_S)]


def run_agentreplay(url: str, workload: Path, args: argparse.Namespace, work: Path,
                    fig: Figures, preset: bool, entries: Sequence[str] = ()) -> None:
    run_dir = work / "run"
    log = work / "agentreplay.log"
    code = _cli("run", "--target", url, "--workload", str(workload), "--out", str(run_dir),
                "--quiet", "--force", *agentreplay_flags(args, preset, entries), log=log)
    if code not in (0, 3):  # 3: stamped invalid, still has figures
        fig.note = f"agentreplay run exited {code}; see {log}"
        return
    _cli("report", str(run_dir), log=log)
    if (run_dir / "requests.jsonl").exists():
        lines = (run_dir / "requests.jsonl").read_bytes().splitlines()
        fig.measured = agentreplay_measured(lines)
        fig.timings, fig.subagent_requests = agentreplay_timings(lines)
    summary = run_dir / "summary.json"
    if summary.exists():
        parse_summary(json.loads(summary.read_text()), fig)
    fig.token_count = "server usage (always)"
    if not preset:
        fig.note = "no --scenario agentx preset yet: equivalent flags"


def parse_summary(data: dict[str, object], fig: Figures) -> None:
    """``summary.json`` of one run: its single level and arm."""
    levels = data.get("levels")
    arm: dict[str, object] = {}
    if isinstance(levels, list) and levels:
        arms = levels[0].get("arms", {})
        if isinstance(arms, dict) and arms:
            arm = next(iter(arms.values()))
    counts = arm.get("counts")
    if isinstance(counts, dict):
        fig.requests = counts.get("in_window")
    fig.p90_interactivity = _stat(arm, "interactivity", "p90")
    fig.ttft_p50_s = _stat(arm, "ttft", "p50")
    fig.ttft_p90_s = _stat(arm, "ttft", "p90")
    fig.prefix_share = _stat(arm, "prefix", "measured_share")
    for attr, key in (("itl_p50_ms", "p50"), ("itl_mean_ms", "mean")):
        v = _stat(arm, "itl", key)
        setattr(fig, attr, None if v is None else v * 1000.0)


# -- the table ----------------------------------------------------------------------
def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table(figs: dict[str, Figures]) -> str:
    rows = [
        ("requests measured (tool)", "requests", ".0f"),
        ("P90 interactivity tok/s", "p90_interactivity", ".1f"),
        ("TTFT P50 s", "ttft_p50_s", ".3f"),
        ("TTFT P90 s", "ttft_p90_s", ".3f"),
        ("ITL P50 ms", "itl_p50_ms", ".3f"),
        ("ITL mean ms", "itl_mean_ms", ".3f"),
        ("prefix-hit share (tool)", "prefix_share", ".3f"),
        ("prefix-hit share (server, whole run)", "prefix_share_server", ".3f"),
        ("requests served ok (truth)", "truth_requests", ".0f"),
        ("mean prompt tokens (truth)", "truth_prompt_tokens", ",.0f"),
        ("mean TPOT ms (truth)", "truth_tpot_ms", ".2f"),
        ("simulator lateness", "sim_lateness", "+.2%"),
    ]
    names = list(figs)
    out = [f"{'':38s}" + "".join(f"{n:>16s}" for n in names)]
    for label, attr, spec in rows:
        out.append(f"{label:38s}" + "".join(f"{_fmt(getattr(figs[n], attr), spec):>16s}"
                                           for n in names))
    for n in names:
        out.append(f"{n}: token count = {figs[n].token_count or '-'}"
                   + (f"; {figs[n].note}" if figs[n].note else ""))
    if len(names) == 2:
        a, b = figs[names[0]], figs[names[1]]
        out.append(same_requests(a.measured, b.measured))
        out.append(subagent_line(a, b))
        out.append(shared_timing(a.timings, b.timings))
        out.append(shared_truth(a, b))
    return "\n".join(out)


def same_requests(a: Mapping[tuple[str, int], tuple[int, int]],
                  b: Mapping[tuple[str, int], tuple[int, int]]) -> str:
    """How alike the two tools' measured requests were: which (session, turn) both
    measured (a session replayed twice counts once, its last replay's lengths), and over
    those the prompt and output lengths as the server counted them."""
    both = sorted(set(a) & set(b))
    if not both:
        return f"same requests: none of {len(a)} / {len(b)} measured (session, turn) in common"
    gaps = [b[k][0] / a[k][0] - 1 for k in both if a[k][0]]
    outs = sum(a[k][1] == b[k][1] for k in both)
    return (f"same requests: {len(both)} (session, turn) measured by both (of {len(a)} / "
            f"{len(b)} main-session ones); prompt tokens (server) differ by "
            f"{np.mean(gaps):+.2%} on average (max |{max(abs(g) for g in gaps):.2%}|), "
            f"output tokens equal on {outs} of {len(both)}")


def aiperf_measured(lines: Sequence[bytes]) -> dict[tuple[str, int], tuple[int, int]]:
    """Main-session profiling requests from AIPerf's ``profile_export.jsonl``."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for line in lines:
        rec = orjson.loads(line)
        meta, metrics = rec.get("metadata", {}), rec.get("metrics", {})
        if meta.get("benchmark_phase") != "profiling" or meta.get("agent_depth", 0) != 0 \
                or rec.get("error") or "usage_prompt_tokens" not in metrics:
            continue
        key = (str(meta.get("conversation_id")), int(meta.get("turn_index", -1)))
        out[key] = (int(metrics["usage_prompt_tokens"]["value"]),
                    int(metrics.get("output_token_count", {}).get("value", 0)))
    return out


def agentreplay_measured(lines: Sequence[bytes]) -> dict[tuple[str, int], tuple[int, int]]:
    """Main-session measured requests from agentreplay's ``requests.jsonl``."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for line in lines:
        rec = orjson.loads(line)
        if rec.get("phase") != "measure" or rec.get("agent") is not None \
                or rec.get("status") != "ok" or rec.get("prompt_tokens_server") is None:
            continue
        out[(rec["session"], rec["turn"])] = (rec["prompt_tokens_server"], rec["output_tokens"])
    return out


def _aiperf_key(meta: Mapping[str, object]) -> Key:
    """AIPerf names a subagent's conversation ``SESSION::sa:AGENT`` (other side chains
    ``SESSION::KIND:...``); the main session's is the trace id."""
    session, _, rest = str(meta.get("conversation_id")).partition("::")
    agent = rest.removeprefix("sa:") if rest else ""
    turn = meta.get("turn_index", -1)
    return session, agent, int(turn) if isinstance(turn, int) else -1


def aiperf_timings(lines: Sequence[bytes]) -> tuple[dict[Key, Timing], int]:
    """Every completed profiling request's timing from ``profile_export.jsonl``, and how
    many of them were subagents' (``agent_depth`` > 0)."""
    out: dict[Key, Timing] = {}
    subs = 0
    for line in lines:
        rec = orjson.loads(line)
        meta, metrics = rec.get("metadata", {}), rec.get("metrics", {})
        if meta.get("benchmark_phase") != "profiling" or rec.get("error") \
                or "usage_prompt_tokens" not in metrics:
            continue
        subs += meta.get("agent_depth", 0) != 0
        tpot = metrics.get("inter_token_latency", {}).get("value")
        gaps = metrics.get("inter_chunk_latency", {}).get("value") or []
        out[_aiperf_key(meta)] = Timing(float(tpot) if tpot is not None else None,
                                        tuple(float(g) for g in gaps),
                                        str(meta.get("x_request_id", "")))
    return out, subs


def agentreplay_timings(lines: Sequence[bytes]) -> tuple[dict[Key, Timing], int]:
    """Every completed measured request's timing from ``requests.jsonl``, and how many
    of them were subagents'."""
    out: dict[Key, Timing] = {}
    subs = 0
    for line in lines:
        rec = orjson.loads(line)
        if rec.get("phase") != "measure" or rec.get("status") != "ok":
            continue
        subs += rec.get("agent") is not None
        n = rec.get("output_tokens") or 0
        first, last = rec.get("first_token_s"), rec.get("last_token_s")
        tpot = (last - first) * 1e3 / (n - 1) if n >= 2 and first is not None \
            and last is not None else None
        times, tokens = rec.get("chunk_times_s") or [], rec.get("chunk_tokens") or []
        gaps: list[float] = [0.0] * max(0, (tokens[0] if tokens else 1) - 1)
        for i in range(1, min(len(times), len(tokens))):
            k = max(int(tokens[i]), 1)
            gaps += [(times[i] - times[i - 1]) * 1e3 / k] * k
        out[(rec["session"], rec.get("agent") or "", rec["turn"])] = Timing(
            tpot, tuple(gaps), str(rec.get("id", "")))
    return out, subs


def _pct(a: float, b: float) -> str:
    return f"{b / a - 1:+.1%}" if a else "-"


def shared_truth(a: Figures, b: Figures) -> str:
    """Over the requests both measured and both servers logged: P90 interactivity as each
    tool timed it, as the simulator delivered it, and as its profile gives it (free of
    lateness): splits a gap into the tools' timing, the servers' lateness and the load
    each tool's schedule made (the batch each request decoded in)."""
    both = sorted(k for k in set(a.timings) & set(b.timings)
                  if a.timings[k].tpot_ms is not None and b.timings[k].tpot_ms is not None
                  and a.timings[k].request_id in a.truth_tpots
                  and b.timings[k].request_id in b.truth_tpots)
    if not both:
        return "truth: no shared request in both truth logs"
    cols = []
    for f in (a, b):
        tool = [f.timings[k].tpot_ms or 0.0 for k in both]
        truth = [f.truth_tpots[f.timings[k].request_id] for k in both]
        cols.append([1e3 / float(np.percentile(v, 90)) for v in
                     (tool, [t[0] for t in truth], [t[1] for t in truth])])
    (ta, da, ma), (tb, db, mb) = cols
    return (f"P90 interactivity on those {len(both)}: timed by the tool {ta:.1f} vs {tb:.1f}, "
            f"delivered by the server {da:.1f} vs {db:.1f}, the profile's {ma:.1f} vs "
            f"{mb:.1f} tok/s")


def shared_timing(a: Mapping[Key, Timing], b: Mapping[Key, Timing]) -> str:
    """P90 interactivity (1 / P90 TPOT) and ITL (P50, mean of the per-token gaps) of the
    two tools over the requests both measured, main sessions' and subagents' alike:
    the same requests, so what differs is how each was served and timed."""
    both = sorted(k for k in set(a) & set(b)
                  if a[k].tpot_ms is not None and b[k].tpot_ms is not None)
    if not both:
        return "shared requests: none with a TPOT in both"
    figs = []
    for side in (a, b):
        tpots = np.array([side[k].tpot_ms for k in both], dtype=float)
        gaps = np.concatenate([np.asarray(side[k].gaps_ms, dtype=float) for k in both])
        figs.append((1e3 / float(np.percentile(tpots, 90)),
                     float(np.median(gaps)) if gaps.size else float("nan"),
                     float(gaps.mean()) if gaps.size else float("nan")))
    (pa, ma, ea), (pb, mb, eb) = figs
    subs = sum(1 for k in both if k[1])
    return (f"shared requests: {len(both)} measured by both ({subs} of them subagents'): "
            f"P90 interactivity {pa:.1f} vs {pb:.1f} tok/s ({_pct(pa, pb)}), ITL P50 "
            f"{ma:.3f} vs {mb:.3f} ms ({_pct(ma, mb)}), ITL mean {ea:.3f} vs {eb:.3f} ms "
            f"({_pct(ea, eb)})")


def subagent_line(a: Figures, b: Figures) -> str:
    """Subagent requests each tool measured: all replays counted, and the distinct
    (session, agent, turn) among them, so the two tools' counts compare like for like."""
    def distinct(f: Figures) -> int:
        return sum(1 for k in f.timings if k[1])

    both = sum(1 for k in set(a.timings) & set(b.timings) if k[1])
    return (f"subagent requests measured: {a.subagent_requests} vs {b.subagent_requests} "
            f"(distinct (session, agent, turn): {distinct(a)} vs {distinct(b)}, "
            f"{both} in both)")


def absolute_weka(src: Path, dst: Path) -> Path:
    """The WEKA sessions with each subagent's times in the absolute shape (its entry's
    ``t`` the spawn, its requests' ``t`` in session time; ``traces/importers/_weka.py``):
    the shape AIPerf reads. The shared sample is relative (entry ``t`` = finish,
    nested ``t`` from the spawn), which AIPerf 0.13 reads as if ``t`` were the spawn
    (``weka_trace._subagent_request_absolute_t``), starting each subagent when it
    finished and letting the parent run on beside it. agentreplay reads both shapes
    alike, so both tools replay these files."""
    dst.mkdir(parents=True, exist_ok=True)
    for path in sorted(src.glob("*.json")):
        obj = orjson.loads(path.read_bytes())
        for sess in obj if isinstance(obj, list) else [obj]:
            for req in sess.get("requests", []):
                inner = req.get("requests") or []
                if req.get("type") != "subagent" or req.get("duration_ms") is None \
                        or not inner or inner[0].get("t", 0.0) >= req["t"]:
                    continue  # background, or already absolute
                spawn = round(req["t"] - req["duration_ms"] / 1000.0, 6)
                req["t"] = spawn
                for r in inner:
                    r["t"] = round(spawn + r.get("t", 0.0), 6)
        (dst / path.name).write_bytes(orjson.dumps(obj))
    return dst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weka", type=Path, default=WEKA, help="directory of WEKA session files")
    ap.add_argument("--profile", default="kimi-k3-gb300-tp16")
    ap.add_argument("--backend", default="latency_specialized",
                    choices=["latency_specialized", "auto"])
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--duration", type=float, default=60.0, help="measured seconds per tool")
    ap.add_argument("--grace", type=float, default=10.0, help="AIPerf grace / our drain, s")
    ap.add_argument("--warmup", type=float, default=None,
                    help="agentreplay warmup, s (default 10; --rules v1: 45, the time its "
                         "10 priming turns per lane may take)")
    ap.add_argument("--tools", default="aiperf,agentreplay")
    ap.add_argument("--rules", choices=["mvp", "v1"], default="mvp",
                    help="AgentX MVP rules, or the agentx-harness 1.0.x ones")
    ap.add_argument("--out", type=Path, default=None, help="keep the runs here")
    ap.add_argument("--weka-shape", choices=["absolute", "as-is"], default="absolute",
                    help="hand both tools the sessions with subagent times rewritten in "
                         "the absolute shape AIPerf reads (default), or the files as they "
                         "are (AIPerf 0.13 then starts the sample's subagents when they "
                         "finished)")
    ap.add_argument("--own-entries", action="store_true",
                    help="let agentreplay draw its lanes' entry turns itself (default: "
                         "replay AIPerf's, --entry from its log)")
    args = ap.parse_args(argv)
    if args.warmup is None:
        args.warmup = 45.0 if args.rules == "v1" else 10.0
    if not args.weka.is_dir():
        print(f"agentx_crosscheck: --weka {args.weka}: not a directory", file=sys.stderr)
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="agentx-crosscheck-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.weka_shape == "absolute":
        args.weka = absolute_weka(args.weka, out / "weka-absolute")
    profile = wide_profile(args.profile, out)
    model = load_profile(args.profile).model
    workload = out / "weka.jsonl"
    if _cli("traces", "import", "--format", "weka", str(args.weka), "-o", str(workload)):
        return 1
    figs: dict[str, Figures] = {}
    tools = args.tools.split(",")
    if "aiperf" in tools:
        version = ensure_tool("aiperf")
        tokenizer = sim_word_tokenizer()
        fig = figs[f"aiperf {version}"] = Figures()
        work = out / "aiperf"
        work.mkdir(exist_ok=True)
        served(profile, args.backend, work, fig,
               lambda url: run_aiperf(url, model, args, tokenizer, work, fig))
    earlier = out / "aiperf"
    if "aiperf" not in tools and read_aiperf(earlier / "artifacts", fig := Figures()):
        # an earlier AIPerf run in this --out (--tools agentreplay reran our side):
        # its own figures and its server's truth (no /metrics deltas kept)
        truth_figures(earlier / "truth.jsonl", fig)
        fig.note = "an earlier run in this --out"
        figs["aiperf (earlier)"] = fig
    entries: list[str] = []
    if not args.own_entries and (out / "aiperf" / "aiperf.log").exists():  # this run's, or
        # an earlier AIPerf run's in the same --out (--tools agentreplay reruns our side)
        entries = aiperf_lanes((out / "aiperf" / "aiperf.log").read_text(errors="replace"))
    if "agentreplay" in tools:
        preset = has_scenario_preset()
        fig = figs["agentreplay"] = Figures()
        work = out / "agentreplay"
        work.mkdir(exist_ok=True)
        served(profile, args.backend, work, fig,
               lambda url: run_agentreplay(url, workload, args, work, fig, preset, entries))
        print("agentreplay flags: " + " ".join(agentreplay_flags(args, preset, entries)))
    print(f"AgentX cross-check: {args.weka} on serve-sim {args.profile} ({args.backend}, "
          f"max_model_len widened), concurrency {args.concurrency}, {args.duration:g} s "
          f"measured; runs in {out}")
    print(table(figs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
