"""Issue 25: chat mode's preflight is bounded whatever the server answers: a
/detokenize answering "" is given up after one request per chunk (it drove 523,776
requests), and a 60 MB /tokenize answer is read no further than the limit (it took
the client to 893 MB)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.chat_server import chat_server
from tests.support.runs import REPO
from tests.support.workloads import make_workload

pytestmark = pytest.mark.sim

_MEASURED = """
import resource, subprocess, sys
res = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=120)
sys.stderr.write(res.stderr)
print(res.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _run_chat(url: str, tmp: Path) -> tuple[int, int, str]:
    """``run --api chat`` against ``url``: exit code, peak RSS (KiB), stderr."""
    wl = make_workload(tmp / "wl.jsonl", sessions=1, turns=1)
    argv = [sys.executable, "-m", "replay.cli", "run", "--target", url, "--workload",
            str(wl), "--api", "chat", "--vocab-size", "262144", "--duration", "2",
            "--out", str(tmp / "run"), "--quiet"]
    res = subprocess.run([sys.executable, "-c", _MEASURED, *argv], cwd=REPO,
                         capture_output=True, text=True, timeout=180, check=False)
    code, rss = res.stdout.split()
    return int(code), int(rss), res.stderr


def _one_line(code: int, err: str, *words: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.startswith("agentreplay: error: ")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), (words, lines[0])


def test_an_empty_detokenize_is_given_up_in_bounded_requests(tmp_path: Path) -> None:
    with chat_server("empty") as srv:
        code, _, err = _run_chat(srv.url, tmp_path)
    _one_line(code, err, "single-token words")
    assert srv.asked["detokenize"] <= (1 << 18) // 512  # one per chunk of the scan


def test_a_huge_tokenize_answer_is_read_up_to_the_limit(tmp_path: Path) -> None:
    with chat_server("huge_tokenize") as srv:
        code, rss_kib, err = _run_chat(srv.url, tmp_path)
    _one_line(code, err, "/tokenize", "bytes")
    assert rss_kib < 400 * 1024, f"peak RSS {rss_kib / 1024:.0f} MiB"


def test_the_vocabulary_search_is_bounded_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that answers each one-token probe slowly ends the search at its
    deadline with one line (it could take 40 probes x 120 s)."""
    import asyncio

    import aiohttp
    from aiohttp import web

    import replay.client._probe as probe
    from replay.client import search_vocab_size
    from replay.errors import TargetError

    monkeypatch.setattr(probe, "_VOCAB_SEARCH_S", 0.5)

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.2)
        return web.json_response({"choices": [{"text": "x"}]})

    async def go() -> str:
        app = web.Application()
        app.router.add_post("/v1/completions", slow)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        try:
            async with aiohttp.ClientSession() as session:
                with pytest.raises(TargetError) as exc:
                    await search_vocab_size(session, url, {}, "m", url)
                return str(exc.value)
        finally:
            await runner.cleanup()

    assert "--vocab-size" in asyncio.run(go())
