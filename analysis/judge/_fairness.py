"""The fairness verdict: may these runs be compared at all?

Two arms are comparable when they ran the same model on the same GPUs with the
same server configuration except the decode backend, the same workload and the
same load. The server's ``/server_info`` ``vllm_config`` is diffed field by
field, recursively; every difference refuses the comparison except:

- ``ALLOWED``: ``additional_config.decode_backend``, the thing under test.
- ``VOLATILE``: values that change from one launch of the *same* configuration
  to the next and do not change how requests are served: network ports and
  addresses (``*port*``, ``*_ip``, ``host``), the server ``instance_id``,
  and local run-time paths (``cache_dir``, ``local_cache_dir``,
  ``debug_dump_path``, ``download_dir``). Seeds are NOT volatile: the sampling
  seed decides the generated tokens, which the next turn resends and which a
  speculative decoder accepts or rejects, so it is compared like any field.
- ``NOTED``: ``num_gpu_blocks``/``num_cpu_blocks`` (KV cache blocks found by
  memory profiling at start-up). They follow from the backend's own memory
  use, so a difference is part of what is measured; it is listed, not refused.

The environment counts as much as the flags: ``/server_info`` also reports
``vllm_env`` (every ``VLLM_*`` setting the server runs with, defaults
included), and variables such as ``VLLM_ATTENTION_BACKEND`` or
``VLLM_CPU_ATTN_SPLIT_KV`` choose kernels. Each variable is diffed like a config
field: refused by default; ``ignored`` when it only names where things live or
how the server talks and logs (ports, hosts, paths, logging, usage stats, build
labels, the shared-memory buffer name drawn at start-up); ``noted`` for
time-outs and media-fetch limits, which do not touch the engine.

For launched arms the full command line is compared too (``launch_commands``):
options are parsed into name -> value, ``--additional-config`` into its JSON
fields; ``decode_backend`` is allowed, ``--port``/``--host`` ignored, anything
else refused.

Arms whose configurations do not differ at all (the decode backend included, or
one server behind every arm: a mistyped URL) are fair but ``identical``: an A/A
run, whose differences are the noise floor, never a backend's effect.

Load settings must be equal except ``users`` (the concurrency level), and
workload fingerprints equal. Without a ``vllm_config`` the configuration
cannot be verified, which also refuses unless overridden; the message says to
start vLLM with ``VLLM_SERVER_DEV_MODE=1``, which enables ``/server_info``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import orjson
from pydantic import BaseModel, ConfigDict, Field

from analysis.judge._identical import aa_sentence, identical_arms
from analysis.schema import FairnessError, Replica, RunManifest

__all__ = [
    "ALLOWED_FIELDS",
    "ConfigDiff",
    "FairnessVerdict",
    "command_options",
    "diff_configs",
    "env_verdict",
    "gpu_count_of",
    "judge_fairness",
    "replica_diffs",
]

ALLOWED_FIELDS = frozenset({"additional_config.decode_backend"})
_VOLATILE_NAMES = frozenset({
    "instance_id", "host", "cache_dir", "local_cache_dir", "debug_dump_path", "download_dir",
})
_NOTED_NAMES = frozenset({"num_gpu_blocks", "num_cpu_blocks"})
_MISSING = "<missing>"
DEV_MODE_HINT = ("start vLLM with VLLM_SERVER_DEV_MODE=1 so /server_info reports its "
                 "configuration")

# VLLM_* variables that say where things live or how the server talks and logs
# (matched by whole name, or by one of the "_"-separated words of the name).
_ENV_IGNORED_EXACT = frozenset({
    "VLLM_SERVER_DEV_MODE", "VLLM_OBJECT_STORAGE_SHM_BUFFER_NAME", "VLLM_ASSETS_CACHE",
    "VLLM_MEDIA_CACHE", "VLLM_CONFIGURE_LOGGING", "VLLM_TRACE_FUNCTION", "VLLM_API_KEY",
    "VLLM_DEBUG_LOG_API_SERVER_RESPONSE", "VLLM_DISABLE_LOG_LOGO",
})
_ENV_IGNORED_WORDS = frozenset({
    "PORT", "HOST", "IP", "LOGGING", "LOG", "PATH", "ROOT", "BUILD", "RPC", "TRACK", "USAGE",
    "TAG", "PREFIX", "ALIVE",
})
_ENV_NOTED_WORDS = frozenset({"TIMEOUT", "FETCH", "MEDIA", "AUDIO", "IMAGE", "VIDEO",
                              "INTERVAL", "COLOR", "PROFILING"})
# Launcher options that differ between side-by-side arms without changing what is served.
_CMD_IGNORED = frozenset({"--port", "--host"})
_CMD_ALLOWED = frozenset({"--additional-config.decode_backend"})


def _is_volatile(path: str) -> bool:
    leaf = path.rsplit(".", 1)[-1].split("[", 1)[0]
    return leaf in _VOLATILE_NAMES or "port" in leaf.split("_") or leaf.endswith("_ip")


def _is_noted(path: str) -> bool:
    return path.rsplit(".", 1)[-1] in _NOTED_NAMES


def env_verdict(name: str) -> str:
    """``refused``, ``noted`` or ``ignored`` for a differing ``VLLM_*`` variable."""
    upper = name.upper()
    words = set(upper.split("_"))
    if upper in _ENV_IGNORED_EXACT or words & _ENV_IGNORED_WORDS:
        return "ignored"
    if words & _ENV_NOTED_WORDS:
        return "noted"
    return "refused"


def command_options(argv: Sequence[str]) -> dict[str, object]:
    """A server command line as ``{option: value}``; JSON option values are expanded.

    Positional words (the program, ``-m MODULE``, ``serve MODEL``) are kept by
    position as ``argv[i]``; a flag without a value maps to True.
    """
    out: dict[str, object] = {}
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            out[f"argv[{i}]"] = arg
            i += 1
            continue
        name, eq, value = arg.partition("=")
        if not eq:
            if i + 1 < len(args) and not args[i + 1].startswith("--"):
                value, i = args[i + 1], i + 1
            else:
                value = ""
        i += 1
        parsed: object = value if eq or value else True
        if isinstance(parsed, str) and parsed[:1] in "{[":
            try:
                parsed = json.loads(parsed)
            except ValueError:
                pass
        if isinstance(parsed, dict):
            for key, sub in parsed.items():
                out[f"{name}.{key}"] = sub
        else:
            out[name] = parsed
    return out


def _command_verdict(option: str) -> str:
    if option in _CMD_ALLOWED:
        return "allowed"
    return "ignored" if option in _CMD_IGNORED else "refused"


def _vllm_env(m: RunManifest) -> dict[str, object] | None:
    env = (m.server_info or {}).get("vllm_env")
    return env if isinstance(env, dict) else None


class ConfigDiff(BaseModel):
    """One field that differs between the baseline run and another run."""

    model_config = ConfigDict(extra="forbid")

    field: str
    run: str
    baseline: str
    other: str
    verdict: str
    """``refused``, ``allowed`` (the decode backend), ``noted`` or ``ignored`` (volatile)."""


class FairnessVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fair: bool
    overridden: bool = False
    same_gpu_count: bool
    gpu_counts: list[int | None]
    verified: bool
    """False when some run carried no vllm_config to diff."""
    differences: list[ConfigDiff] = Field(default_factory=list)
    identical: bool = False
    """A/A: two or more arms and nothing differs between them, the decode backend
    included (or every arm is one server): what they measure apart is noise."""
    sentence: str
    ignored_fields: list[str] = Field(
        default_factory=lambda: sorted(_VOLATILE_NAMES) + ["*port*", "*_ip"])


def flatten_config(value: object, prefix: str, out: dict[str, object]) -> None:
    if isinstance(value, dict) and value:
        for k in sorted(value, key=str):
            flatten_config(value[k], f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value and any(isinstance(v, dict | list) for v in value):
        for i, v in enumerate(value):
            flatten_config(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = value


def diff_configs(a: object, b: object) -> list[tuple[str, object, object]]:
    """Every leaf field that differs between two nested configs: (path, a, b)."""
    fa: dict[str, object] = {}
    fb: dict[str, object] = {}
    flatten_config(a, "", fa)
    flatten_config(b, "", fb)
    diffs = []
    for key in sorted(set(fa) | set(fb)):
        va, vb = fa.get(key, _MISSING), fb.get(key, _MISSING)
        if va != vb or type(va) is not type(vb):
            if isinstance(va, int | float) and isinstance(vb, int | float) and va == vb \
                    and not isinstance(va, bool) and not isinstance(vb, bool):
                continue
            diffs.append((key, va, vb))
    return diffs


def _vllm_config(m: RunManifest) -> dict[str, object] | None:
    return _config_of(m.server_info)


def _config_of(server_info: dict[str, object] | None) -> dict[str, object] | None:
    info = server_info or {}
    cfg = info.get("vllm_config")
    if isinstance(cfg, str):
        try:
            cfg = orjson.loads(cfg)
        except orjson.JSONDecodeError:
            return {"<text>": cfg}
    return cfg if isinstance(cfg, dict) else None


def gpu_count_of(m: RunManifest) -> int | None:
    """TP x PP x DP from the server config, else the manifest's gpu_count; a fleet's is
    the sum over its replicas (None when one of them is unknown)."""
    if m.replicas:
        counts = [_gpus(r.server_info, r.gpu_count) for r in m.replicas]
        return None if None in counts else sum(c for c in counts if c is not None)
    return _gpus(m.server_info, m.gpu_count)


def _gpus(server_info: dict[str, object] | None, reported: int | None) -> int | None:
    cfg = _config_of(server_info)
    par = cfg.get("parallel_config") if cfg else None
    if isinstance(par, dict):
        sizes = [par.get(k, 1) for k in
                 ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")]
        if all(isinstance(s, int) and s > 0 for s in sizes):
            return int(sizes[0] * sizes[1] * sizes[2])
    return reported


def replica_diffs(replicas: Sequence[Replica], run_id: str = "") -> list[ConfigDiff]:
    """Every way a replica of a fleet (a run's ``replicas``) differs from its first. A
    fleet measured as one target is only that when its servers are alike, so here the
    decode backend is refused too (only volatile fields are ignored, KV block counts
    noted). Each arm's first replica is then compared across arms as usual, so every
    replica of every arm is held to the same configuration."""
    if len(replicas) < 2:
        return []
    first = replicas[0]
    cfg0, env0 = _config_of(first.server_info), (first.server_info or {}).get("vllm_env")
    out: list[ConfigDiff] = []
    for k, rep in enumerate(replicas[1:], start=1):
        run = f"{run_id} replica {k} ({rep.target})".lstrip()

        def add(field: str, a: object, b: object, verdict: str, run: str = run) -> None:
            out.append(ConfigDiff(field=f"replicas.{field}", run=run, baseline=_show(a),
                                  other=_show(b), verdict=verdict))

        cfg = _config_of(rep.server_info)
        if cfg is not None and cfg0 is not None:
            for path, a, b in diff_configs(cfg0, cfg):
                verdict = ("ignored" if _is_volatile(path) else "noted" if _is_noted(path)
                           else "refused")
                add(f"vllm_config.{path}", a, b, verdict)
            env = (rep.server_info or {}).get("vllm_env")
            for name, a, b in diff_configs(env0 or {}, env or {}):
                add(f"vllm_env.{name}", a, b, env_verdict(name))
        if rep.model != first.model:
            add("model", first.model, rep.model, "refused")
        a, b = _gpus(first.server_info, first.gpu_count), _gpus(rep.server_info, rep.gpu_count)
        if a != b:
            add("gpu_count", a, b, "refused")
    return out


def _show(v: object) -> str:
    if v is _MISSING:
        return _MISSING
    return orjson.dumps(v, option=orjson.OPT_SORT_KEYS, default=str).decode()


def _diff(field: str, run: RunManifest, a: object, b: object, verdict: str) -> ConfigDiff:
    return ConfigDiff(field=field, run=run.run_id, baseline=_show(a), other=_show(b),
                      verdict=verdict)


def _config_diffs(base_cfg: dict[str, object], cfg: dict[str, object],
                  m: RunManifest) -> list[ConfigDiff]:
    out = []
    for path, a, b in diff_configs(base_cfg, cfg):
        verdict = ("allowed" if path in ALLOWED_FIELDS else "ignored" if _is_volatile(path)
                   else "noted" if _is_noted(path) else "refused")
        out.append(_diff(f"vllm_config.{path}", m, a, b, verdict))
    return out


def _env_diffs(base_env: dict[str, object] | None, env: dict[str, object] | None,
               m: RunManifest) -> list[ConfigDiff]:
    out = []
    for name in sorted(set(env or {}) | set(base_env or {}), key=str):
        a, b = (base_env or {}).get(name, _MISSING), (env or {}).get(name, _MISSING)
        if a != b:
            out.append(_diff(f"vllm_env.{name}", m, a, b, env_verdict(str(name))))
    return out


def _command_diffs(base_cmd: dict[str, object], argv: Sequence[str],
                   m: RunManifest) -> list[ConfigDiff]:
    opts = command_options(argv)
    out = []
    for name in sorted(set(opts) | set(base_cmd)):
        a, b = base_cmd.get(name, _MISSING), opts.get(name, _MISSING)
        if a != b:
            out.append(_diff(f"command.{name}", m, a, b, _command_verdict(name)))
    return out


def _setup_diffs(base: RunManifest, m: RunManifest) -> list[ConfigDiff]:
    """Model, GPUs, workload, load settings (but the level), API, simulated: all refused."""
    out = []
    same: tuple[tuple[str, object, object], ...] = (
        ("model", base.model, m.model),
        ("gpu_count", gpu_count_of(base), gpu_count_of(m)),
        ("workload.fingerprint", base.workload.fingerprint, m.workload.fingerprint))
    for field, a, b in same:
        if a != b:
            out.append(_diff(field, m, a, b, "refused"))
    level = {"users", "rate", "time_scale"}
    for path, x, y in diff_configs(base.load.model_dump(exclude=level),
                                   m.load.model_dump(exclude=level)):
        out.append(_diff(f"load.{path}", m, x, y, "refused"))
    tail: tuple[tuple[str, object, object], ...] = (
        ("api", base.api, m.api), ("simulated", base.simulated, m.simulated))
    for field, a, b in tail:
        if a != b:
            out.append(_diff(field, m, a, b, "refused"))
    return out


def _unfair(refused: list[ConfigDiff], verified: bool) -> FairnessError:
    fields = sorted({d.field for d in refused})
    reasons = ["differ in: " + ", ".join(fields)] if fields else []
    if not verified:
        reasons.append("cannot be verified: some run has no server_info vllm_config "
                       f"({DEV_MODE_HINT})")
    return FairnessError(
        f"the runs are not comparable; they {'; '.join(reasons)} "
        "(pass --allow-unfair to report anyway, with a warning on every section)",
        [(d.field, d.baseline, d.other) for d in refused],
    )


def judge_fairness(
    manifests: Sequence[RunManifest], *, allow_unfair: bool = False,
    require_config: bool = True,
    launch_commands: Sequence[Sequence[str] | None] | None = None,
) -> FairnessVerdict:
    """Diff every run against the first; raise FairnessError unless fair or overridden.

    ``require_config=False`` (a single arm: nothing is compared across backends)
    accepts runs without a ``vllm_config``; they are still marked unverified.
    ``launch_commands`` (one argv per manifest, None for a server not launched by
    us) adds the launched arms' command lines to the diff.
    """
    if not manifests:
        raise FairnessError("no runs to compare", [])
    commands = list(launch_commands) if launch_commands is not None else [None] * len(manifests)
    if len(commands) != len(manifests):
        raise ValueError("launch_commands needs one entry per manifest")
    base = manifests[0]
    base_cfg, base_env = _vllm_config(base), _vllm_env(base)
    base_cmd = command_options(commands[0]) if commands[0] is not None else None
    diffs: list[ConfigDiff] = []
    verified = True
    for m in manifests:  # a fleet's replicas must be alike, backend included
        diffs.extend(replica_diffs(m.replicas, m.run_id))
        verified = verified and all(_config_of(r.server_info) is not None for r in m.replicas)
    for m, argv in zip(manifests, commands, strict=True):
        cfg = _vllm_config(m)
        verified = verified and cfg is not None
        if m is base:
            continue
        if cfg is not None and base_cfg is not None:
            diffs += _config_diffs(base_cfg, cfg, m)
            env = _vllm_env(m)
            if env is not None or base_env is not None:
                diffs += _env_diffs(base_env, env, m)
        if base_cmd is not None and argv is not None:
            diffs += _command_diffs(base_cmd, argv, m)
        diffs += _setup_diffs(base, m)
    refused = [d for d in diffs if d.verdict == "refused"]
    gpus = [gpu_count_of(m) for m in manifests]
    same_gpu = len(set(gpus)) == 1 and gpus[0] is not None
    fair = not refused and (verified or not require_config)
    if not fair and not allow_unfair:
        raise _unfair(refused, verified)
    identical = fair and identical_arms(manifests, [d.verdict for d in diffs], verified)
    sentence = _sentence(fair, verified, same_gpu, gpus, refused)
    if identical:
        sentence = aa_sentence(manifests, same_gpu, gpus)
    return FairnessVerdict(
        fair=fair, overridden=not fair, same_gpu_count=same_gpu, gpu_counts=gpus,
        verified=verified, differences=diffs, identical=identical, sentence=sentence,
    )


def _sentence(
    fair: bool, verified: bool, same_gpu: bool, gpus: list[int | None], refused: list[ConfigDiff]
) -> str:
    gpu_text = (f"same GPU count ({gpus[0]})" if same_gpu
                else "GPU counts " + ", ".join("unknown" if g is None else str(g)
                                               for g in dict.fromkeys(gpus)))
    if fair:
        checked = "" if verified else " (server configuration not available to verify)"
        return (f"Fair comparison: {gpu_text}, same model, same workload and load; "
                f"only the decode backend differs{checked}.")
    parts = []
    if refused:
        parts.append("the runs differ in " + ", ".join(sorted({d.field for d in refused})))
    if not verified:
        parts.append("some run has no server configuration to verify "
                     "(needs VLLM_SERVER_DEV_MODE=1)")
    return f"UNFAIR comparison ({gpu_text}): " + "; ".join(parts) + "."
