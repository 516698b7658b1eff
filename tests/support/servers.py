"""Loopback servers for tests: an aiohttp app on a free port, simulated servers."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
from aiohttp import web

from replay.servers.sim import SimServerProcess, load_profile

TIME_SCALE = 4.0


@contextlib.contextmanager
def sims(*specs: tuple[str, str]) -> Iterator[list[str]]:
    """Start one simulated server per (profile, backend); yield their URLs; stop them."""
    with contextlib.ExitStack() as stack:
        urls = []
        for profile, backend in specs:
            srv = stack.enter_context(SimServerProcess(profile, backend,
                                                       time_scale=TIME_SCALE))
            urls.append(srv.url)
        yield urls


def profile_variant(tmp: Path, file_name: str = "small-variant.json",
                    **changes: object) -> Path:
    """The ``small`` profile with some figures changed, as a profile file."""
    data = load_profile("small").model_dump(mode="json")
    data.update(changes)
    path = tmp / file_name
    path.write_text(json.dumps(data))
    return path


BIG_KV_BLOCKS = 200_000
"""A KV cache no test's workload fills: nothing is evicted, so every cached prefix the
truth log shows is what the client's expectation must match."""


def big_kv_profile(tmp: Path, **changes: object) -> Path:
    """The ``small`` profile with a KV cache that never evicts here (and ``changes``),
    as a new profile file in ``tmp``."""
    name = f"big-kv-{len(list(tmp.glob('big-kv-*.json')))}.json"
    return profile_variant(tmp, name, num_gpu_blocks=BIG_KV_BLOCKS, **changes)


def exit_for(out: Path) -> int:
    """The exit code ``compare`` (or ``run``) owes for the comparison (or run) in ``out``:
    3 when its summary (``run.json`` for a run) is stamped invalid, else 0. Whether a
    simulator is starved (a busy machine) is a race the test does not control; the code
    must agree with the stamp either way."""
    doc = out / "summary.json" if (out / "summary.json").exists() else out / "run.json"
    summary = orjson.loads(doc.read_bytes())
    return 3 if (summary.get("validity") or {}).get("verdict") == "invalid" else 0


@asynccontextmanager
async def serve_app(app: web.Application) -> AsyncIterator[str]:
    """Serve ``app`` on a free loopback port; yields its base URL."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
