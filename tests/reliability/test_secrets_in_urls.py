"""Issue 25: a user and password in an arm URL (``http://user:secret@host``) reach
the server as Basic auth and no file the comparison writes (comparison.json,
experiment.toml, the report, summary.json, the runs) nor ``--save-config``."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import public_url, read_extras
from analysis.schema import scrub_urls
from replay.servers.sim import SimServerProcess
from tests.support.runs import cli
from tests.support.workloads import make_workload

_SECRET = "pw-planted-25c1"


def _texts(root: Path) -> dict[Path, str]:
    return {p: p.read_text(errors="replace") for p in root.rglob("*") if p.is_file()}


@pytest.mark.sim
def test_compare_writes_no_url_credentials(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=1, turns=2, output=4, think_s=0.0)
    out = tmp_path / "cmp"
    with SimServerProcess("small", time_scale=4.0) as srv:
        url = srv.url.replace("http://", f"http://bob:{_SECRET}@") + f"/?token={_SECRET}"
        res = cli("compare", "--arm", f"a={url}", "--arm", f"b={url}", "--allow-identical",
                  "--workload", str(wl),
                  "--duration", "0.5", "--drain", "2", "--out", str(out), "--quiet",
                  timeout=120)
    assert res.returncode in (0, 3), res.stderr  # 3: stamped invalid (a starved sim)
    written = _texts(out)
    assert {"comparison.json", "experiment.toml", "report.html"} <= {p.name for p in written}
    for path, text in written.items():
        assert _SECRET not in text and "bob" not in text, path
    assert _SECRET not in res.stdout + res.stderr
    assert srv.url.removeprefix("http://") in written[out / "experiment.toml"]


@pytest.mark.cli
def test_save_config_writes_no_url_credentials(tmp_path: Path) -> None:
    wl = make_workload(tmp_path / "wl.jsonl", sessions=1, turns=1)
    saved = tmp_path / "exp.toml"
    res = cli("compare", "--arm", f"a=http://bob:{_SECRET}@127.0.0.1:1", "--arm",
              "b=http://127.0.0.1:2", "--workload", str(wl), "--duration", "1", "--out",
              str(tmp_path / "o"), "--save-config", str(saved))
    assert res.returncode == 0, res.stderr
    text = saved.read_text()
    assert _SECRET not in text and "a=http://127.0.0.1:1" in text


def test_a_stored_file_holding_credentials_is_shown_without_them(tmp_path: Path) -> None:
    (tmp_path / "experiment.toml").write_text(f'arm = ["a=http://bob:{_SECRET}@h:1"]\n')
    shown = read_extras(tmp_path)["experiment"]["pre"]
    assert _SECRET not in shown and "a=http://h:1" in shown
    assert public_url(f"https://bob:{_SECRET}@[::1]:8000/v1?key={_SECRET}#x") == \
        "https://[::1]:8000/v1"
    assert public_url("auto") == "auto"
    assert scrub_urls(f"see http://{_SECRET}@h and ftp://u:{_SECRET}@x/y") == \
        "see http://h and ftp://x/y"
