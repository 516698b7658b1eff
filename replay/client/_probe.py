"""What the target server tells us before a run: models, limits, config.

``/v1/models`` must answer (else the server is unreachable or not OpenAI
compatible); ``/server_info?config_format=json`` is optional (vLLM exposes it in
dev mode, the simulator always). The KV block size comes from there when
present, else from the user's options.

The vocabulary (the token ids a prompt may hold) is never assumed. ``--vocab-size``
overrides; else, in order: ``vocab_size`` in ``/server_info`` (the simulator
reports it; vLLM 0.32 does not), the model's own files when ``/server_info``
names a directory this machine can read (a server on the same host), and last
the server's own check: vLLM answers HTTP 400 "Token id N is out of vocabulary"
to a one-token prompt ``[N]`` past the end, so a search over N with one-token,
one-output requests (about 2 log2(V) of them) finds the first id it rejects.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp
import orjson

from analysis import public_url
from replay.client._limits import read_limited
from replay.errors import ConfigError, TargetError

__all__ = ["ServerFacts", "base_url", "connect_url", "find_key", "probe_server",
           "public_target", "search_vocab_size"]


@dataclass(frozen=True, slots=True)
class ServerFacts:
    """The parts of the server's self-description a run needs."""

    model: str
    models: dict[str, object]
    max_model_len: int | None
    server_info: dict[str, object] | None
    vocab_size: int
    block_size: int
    gpu_count: int | None
    simulated: bool


def base_url(target: str) -> str:
    """The target without query, fragment or a trailing ``/v1`` or slash (credentials
    kept): endpoint paths are appended to it."""
    parts = urlsplit(target.strip())
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[:-3]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def connect_url(target: str) -> tuple[str, str | None]:
    """The base URL to connect to without user info, and a Basic ``Authorization``
    value built from it (None when the URL carries no credentials)."""
    parts = urlsplit(base_url(target))
    if parts.username is None and parts.password is None:
        return base_url(target), None
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    auth = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")), auth


def public_target(target: str) -> str:
    """The target as stored in results: user, password, query and fragment removed
    (:func:`analysis.public_url`, the one place that is decided)."""
    return public_url(base_url(target))


def find_key(tree: object, key: str) -> object | None:
    """First value of ``key`` found depth first in nested dicts/lists (None if absent)."""
    if isinstance(tree, dict):
        if key in tree and tree[key] is not None:
            return tree[key]
        for value in tree.values():
            found = find_key(value, key)
            if found is not None:
                return found
    elif isinstance(tree, list):
        for value in tree:
            found = find_key(value, key)
            if found is not None:
                return found
    return None


async def _get_json(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str],
) -> tuple[int, object | None]:
    timeout = aiohttp.ClientTimeout(total=30, sock_connect=10)
    async with session.get(url, headers=headers, timeout=timeout) as resp:
        raw = await read_limited(resp, public_url(url))
        if resp.status != 200:
            return resp.status, None
        try:
            return resp.status, orjson.loads(raw)
        except orjson.JSONDecodeError:
            return resp.status, None


def _vocab_from_files(model_config: object) -> int | None:
    """Vocabulary from the model directory /server_info names, when it is readable here:
    the larger of config.json's vocab_size and tokenizer.json's largest id + 1 (vLLM's
    own bound)."""
    if not isinstance(model_config, dict):
        return None
    sizes: list[int] = []
    for key in ("model", "tokenizer"):
        where = model_config.get(key)
        if not isinstance(where, str) or not where:
            continue
        base = Path(where)
        for name in ("config.json", "tokenizer.json"):
            try:
                data = json.loads((base / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(data, dict):
                continue
            if name == "config.json":
                inner = data.get("text_config")
                size = (inner if isinstance(inner, dict) else data).get("vocab_size")
                if isinstance(size, int):
                    sizes.append(size)
                continue
            model = data.get("model")
            vocab = model.get("vocab") if isinstance(model, dict) else None
            ids = list(vocab.values()) if isinstance(vocab, dict) else []
            added = data.get("added_tokens")
            ids += [t.get("id") for t in added if isinstance(t, dict)] \
                if isinstance(added, list) else []
            ints = [i for i in ids if isinstance(i, int)]
            if ints:
                sizes.append(max(ints) + 1)
    return max(sizes) if sizes else None


_VOCAB_SEARCH_MAX = 1 << 24
_VOCAB_SEARCH_S = 300.0


async def _accepts_id(session: aiohttp.ClientSession, root: str, headers: dict[str, str],
                      model: str, token_id: int, shown: str) -> bool:
    body = orjson.dumps({"model": model, "prompt": [token_id], "max_tokens": 1,
                         "temperature": 0.0})
    timeout = aiohttp.ClientTimeout(total=120, sock_connect=10)
    try:
        async with session.post(f"{root}/v1/completions", data=body, timeout=timeout,
                                headers={**headers, "Content-Type": "application/json"}) as r:
            raw = await read_limited(r, f"{shown}/v1/completions")
            status = r.status
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise TargetError(f"cannot reach {shown}: {type(exc).__name__}: {exc}") from None
    if status == 200:
        return True
    if status == 400 and b"vocabulary" in raw:
        return False
    raise ConfigError(
        f"{shown} does not expose its vocabulary size and answered HTTP {status} to a "
        f"one-token prompt [{token_id}]; pass --vocab-size")


def _reported_size(found: object, key: str, least: int, shown: str, flag: str, *,
                   given: int | None = None) -> int | None:
    """A size ``/server_info`` reports, if it is one: a whole number from ``least`` to
    2**31; anything else there (0, negative, fractional, huge) is one clear line,
    unless the user gave the size (``given``), which is then used instead."""
    if found is None:
        return None
    ok = isinstance(found, int | float) and not isinstance(found, bool) and \
        least <= found <= 2**31 and float(found).is_integer()
    if not ok and given is not None:
        return None
    if not ok:
        raise TargetError(f"{shown}/server_info reports {key} {str(found)[:40]}, which is "
                          f"not a usable size; pass {flag} to give the right one")
    return int(found) if isinstance(found, int | float) else None


async def search_vocab_size(session: aiohttp.ClientSession, root: str,
                            headers: dict[str, str], model: str, shown: str) -> int:
    """The first token id the server rejects in a prompt (= its vocabulary size):
    about 40 one-token requests, within :data:`_VOCAB_SEARCH_S` in all."""
    try:
        async with asyncio.timeout(_VOCAB_SEARCH_S):
            return await _search_vocab(session, root, headers, model, shown)
    except TimeoutError:
        raise TargetError(f"{shown}: finding the vocabulary size took over "
                          f"{_VOCAB_SEARCH_S:g} s; pass --vocab-size") from None


async def _search_vocab(session: aiohttp.ClientSession, root: str,
                        headers: dict[str, str], model: str, shown: str) -> int:
    if not await _accepts_id(session, root, headers, model, 0, shown):
        raise ConfigError(f"{shown} rejects token id 0; pass --vocab-size")
    good, bad = 0, 1024
    while await _accepts_id(session, root, headers, model, bad, shown):
        good, bad = bad, bad * 2
        if bad > _VOCAB_SEARCH_MAX:
            raise ConfigError(f"{shown} accepts token ids past {_VOCAB_SEARCH_MAX}; "
                              "pass --vocab-size")
    while bad - good > 1:
        mid = (good + bad) // 2
        if await _accepts_id(session, root, headers, model, mid, shown):
            good = mid
        else:
            bad = mid
    return bad


async def probe_server(
    session: aiohttp.ClientSession, target: str, headers: dict[str, str], *,
    model: str | None, vocab_size: int | None, block_size: int | None,
) -> ServerFacts:
    """Ask the server what it serves; fail fast with one clear message if unusable."""
    root, _ = connect_url(target)
    shown = public_target(target)
    try:
        status, models = await _get_json(session, f"{root}/v1/models", headers)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise TargetError(f"cannot reach {shown}: {type(exc).__name__}: {exc}") from None
    if status in (401, 403):
        raise TargetError(f"{shown}/v1/models answered HTTP {status}: check --api-key-env")
    if status != 200 or not isinstance(models, dict) or not isinstance(models.get("data"), list):
        raise TargetError(f"{shown}/v1/models answered HTTP {status}: not an OpenAI-compatible "
                          "server")
    entries = [m for m in models["data"] if isinstance(m, dict) and "id" in m]
    names = [str(m["id"]) for m in entries]
    if not names:
        raise TargetError(f"{shown} serves no model")
    if model is None:
        chosen = entries[0]
    elif model in names:
        chosen = entries[names.index(model)]
    else:
        raise TargetError(f"{shown} does not serve model {model!r}; it serves: "
                          + ", ".join(names))
    max_len = chosen.get("max_model_len")
    try:
        _, info = await _get_json(session, f"{root}/server_info?config_format=json", headers)
    except (aiohttp.ClientError, TimeoutError, OSError):
        info = None
    server_info = info if isinstance(info, dict) else None
    config = server_info.get("vllm_config") if server_info else None
    if isinstance(config, str):  # older vLLM: a repr string, not JSON
        config = None
    if max_len is None and isinstance(config, dict):
        max_len = find_key(config.get("model_config"), "max_model_len")
    vocab = vocab_size
    if vocab is None and isinstance(config, dict):
        found = find_key(config.get("model_config"), "vocab_size")
        vocab = _reported_size(found, "vocab_size", 2, shown, "--vocab-size")
        if vocab is None:
            vocab = _vocab_from_files(config.get("model_config"))
    if vocab is None:
        vocab = await search_vocab_size(session, root, headers, str(chosen["id"]), shown)
    bs = None
    if isinstance(config, dict):
        found = find_key(config.get("cache_config"), "block_size")
        bs = _reported_size(found, "block_size", 1, shown, "--server-block-size",
                            given=block_size)
    if bs is None:
        bs = block_size if block_size is not None else 16
    gpus = None
    if isinstance(config, dict) and isinstance(config.get("parallel_config"), dict):
        par = config["parallel_config"]
        gpus = 1
        for key in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
            val = par.get(key)
            gpus *= int(val) if isinstance(val, int) and val > 0 else 1
    simulated = bool(server_info.get("simulated")) if server_info else False
    return ServerFacts(
        model=str(chosen["id"]), models=models,
        max_model_len=int(max_len) if isinstance(max_len, int | float) else None,
        server_info=server_info, vocab_size=int(vocab), block_size=int(bs), gpu_count=gpus,
        simulated=simulated,
    )
