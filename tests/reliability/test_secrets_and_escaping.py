"""Secrets never leave the Authorization header; strings from servers end up escaped
in the HTML report (end to end, through real runs against the simulator)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from aiohttp import web

import replay.servers.sim._server as sim_server
from replay.servers.sim import SimConfig, SimServer, load_profile
from tests.support.runs import cli, manifest, records
from tests.support.workloads import make_workload

pytestmark = pytest.mark.sim

_KEY = "sk-planted-4f1e9c2b7d"
_URL_SECRET = "pw-planted-77aa"


def test_api_key_only_in_the_authorization_header(tmp_path: Path) -> None:
    """The key from --api-key-env reaches the server as a Bearer token and appears in no
    output file, log line, stdout or stderr; URL credentials are stripped too."""
    wl = make_workload(tmp_path / "wl.jsonl", sessions=2, turns=3, output=8, think_s=0.0)
    seen: list[str | None] = []

    @web.middleware
    async def spy(request: web.Request, handler):  # type: ignore[no-untyped-def]
        seen.append(request.headers.get("Authorization"))
        for name, value in request.headers.items():
            if name.lower() != "authorization":
                assert _KEY not in value and _URL_SECRET not in value
        assert _KEY not in request.path_qs
        return await handler(request)

    async def serve_and_run() -> tuple[int, str, str]:
        srv = SimServer(SimConfig(profile="small", time_scale=4.0))
        original = web.Application

        def app_with_spy(*a: object, **kw: object) -> web.Application:
            app = original(*a, **kw)  # type: ignore[arg-type]
            app.middlewares.append(spy)
            return app

        web_mod = sim_server.web
        web_mod.Application = app_with_spy  # type: ignore[misc]
        try:
            await srv.start()
        finally:
            web_mod.Application = original  # type: ignore[misc]
        try:
            url = srv.url.replace("http://", f"http://bob:{_URL_SECRET}@")
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "replay.cli", "run", "--target", url, "--workload", str(wl),
                "--users", "2", "--duration", "1", "--out", str(tmp_path / "run"), "--plain",
                "--api-key-env", "AR_PLANTED_KEY", "--metrics-interval", "0.3",
                env={**_env(), "AR_PLANTED_KEY": _KEY},
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await asyncio.wait_for(proc.communicate(), 60)
            return proc.returncode or 0, out.decode(), err.decode()
        finally:
            await srv.stop()

    code, out, err = asyncio.run(serve_and_run())
    assert code in (0, 3), err  # 3: stamped invalid (a starved simulator, say)
    assert seen and all(h == f"Bearer {_KEY}" for h in seen), set(seen)
    rep = cli("report", str(tmp_path / "run"))
    assert rep.returncode in (0, 3), rep.stderr
    run = tmp_path / "run"
    assert manifest(run).target.startswith("http://127.0.0.1:")
    assert "bob" not in manifest(run).target
    files = sorted(p for p in run.iterdir() if p.is_file())
    assert {"report.html", "summary.json", "requests.csv", "run.json",
            "requests.jsonl"} <= {p.name for p in files}
    for text in [out, err, rep.stdout, rep.stderr, *(p.read_text(errors="replace")
                                                     for p in files)]:
        assert _KEY not in text and _URL_SECRET not in text
    assert len(records(run)) > 0


def test_bad_target_url_message_hides_credentials(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl")
    from replay.servers.sim import free_port

    res = cli("run", "--target", f"http://bob:{_URL_SECRET}@127.0.0.1:{free_port()}",
              "--workload", str(wl), "--duration", "1", "--out", str(tmp_path / "r"),
              "--quiet")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert _URL_SECRET not in res.stderr + res.stdout


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "AR_PLANTED_KEY"}


_SCRIPT = "<script>alert('x')</script>"


@pytest.mark.slow
def test_server_strings_are_escaped_in_the_report(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Script tags planted in the served model name, a /server_info config field and an
    injected fault's message, through a real run: the report shows them escaped."""
    profile = load_profile("small").model_copy(update={
        "model": f"sim/{_SCRIPT}m", "gpu": f"{_SCRIPT}gpu", "num_gpu_blocks": 20_000})
    path = tmp_path / "profile.json"
    path.write_text(profile.model_dump_json())
    real_error_body = sim_server.error_body

    def planted(message: str, *a: object, **kw: object) -> dict[str, object]:
        return real_error_body(f"{message} {_SCRIPT}", *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(sim_server, "error_body", planted)
    wl = make_workload(tmp_path / "wl.jsonl", sessions=2, turns=3, output=8, think_s=0.0)
    faults = {"error_rate": 0.3}

    async def go() -> None:
        async with SimServer(SimConfig(profile=str(path), time_scale=4.0, faults=faults,
                                       seed=2)) as srv:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "replay.cli", "run", "--target", srv.url, "--workload",
                str(wl), "--users", "2", "--duration", "1.2", "--out", str(tmp_path / "run"),
                "--quiet", "--label", "arm",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            _, err = await asyncio.wait_for(proc.communicate(), 60)
            assert proc.returncode in (0, 3), err.decode()

    asyncio.run(go())
    run = tmp_path / "run"
    # a label from the command line is letters, digits and -_.+ (refused otherwise, before
    # any load); a hand-edited run.json can still carry markup, which must be escaped
    raw = json.loads((run / "run.json").read_text())
    raw["label"] = f"{_SCRIPT}arm"
    (run / "run.json").write_text(json.dumps(raw))
    m = manifest(run)
    assert _SCRIPT in m.model and _SCRIPT in json.dumps(m.server_info)
    assert any(_SCRIPT in (r.error_message or "") for r in records(run))
    rep = cli("report", str(run))
    assert rep.returncode in (0, 3), rep.stderr
    html = (run / "report.html").read_text(encoding="utf-8")
    assert "<script" not in html.lower()
    escaped = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"
    assert f"sim/{escaped}m" in html  # model name
    assert f"{escaped}gpu" in html  # server config field
    assert f"(simulated) {escaped}" in html  # fault message
    assert f"{escaped}arm" in html  # arm label (hand-edited into run.json)
