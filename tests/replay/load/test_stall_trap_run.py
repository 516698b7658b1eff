"""A run whose results disk blocks: the manifest names the blocking write.

The trap is a ``requests.jsonl`` whose first write blocks the event loop until the
stall watchdog has taken the loop's frames (no fixed sleep: certain on any
machine), so the run's client health must show that stall at the writer, and the
run keeps every record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from io import FileIO
from pathlib import Path

import orjson
import pytest

import replay.load._writer as writer_mod
from analysis import RunManifest
from replay.load._health import PERIOD_S
from replay.load._stalls import StallWatch
from replay.servers.sim import SimServerProcess
from tests.support.commands import call
from tests.support.workloads import make_workload

pytestmark = pytest.mark.sim

_LIMIT_S = 30.0
_HANG_S = 0.3


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    with SimServerProcess("instant", time_scale=1.0) as srv:
        yield srv.url


def test_a_blocking_results_write_is_named_in_the_manifest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sim: str) -> None:
    captured = threading.Event()
    check = StallWatch.check

    def watched(self: StallWatch, now_ns: int) -> None:
        check(self, now_ns)
        if self.stalled:
            captured.set()

    class SlowDisk(FileIO):
        """The first record write hangs (a stalled disk) until the watchdog saw it."""

        hung = False

        def write(self, data: object) -> int:
            if not SlowDisk.hung:
                SlowDisk.hung = True
                assert captured.wait(_LIMIT_S), "the watchdog never saw the loop stall"
                time.sleep(_HANG_S)  # a floor: the stall is longer than the caveat's bar
            return super().write(data)  # type: ignore[arg-type]

    real = writer_mod._open_raw
    monkeypatch.setattr(StallWatch, "check", watched)
    monkeypatch.setattr(writer_mod, "_open_raw", lambda p: SlowDisk(p, "w")
                        if p.name == "requests.jsonl" else real(p))
    wl = make_workload(tmp_path / "wl.jsonl", sessions=2, turns=6, output=4, think_s=0.0)
    out = tmp_path / "run"
    code, err = call(["run", "--target", sim, "--workload", str(wl), "--users", "2",
                      "--warmup", "0", "--duration", "2", "--out", str(out), "--quiet"])
    assert code in (0, 3), err
    manifest = RunManifest.model_validate_json((out / "run.json").read_bytes())
    health = manifest.client_health
    assert health is not None and SlowDisk.hung
    at_writer = [s for s in health.loop_stalls
                 if any(f.startswith("replay/load/_writer.py:") and f.endswith(" append")
                        for f in s.frames)]
    assert at_writer, health.loop_stalls
    # off the CPU while it hangs: blocked, or starved if the busy machine then kept
    # the loop waiting for a CPU longer than it hung
    assert at_writer[0].kind in ("blocked", "starved")
    assert any(f.endswith(" write") and "test_stall_trap_run.py" in f
               for f in at_writer[0].frames)
    assert sum(health.loop_stall_kinds.values()) >= 1
    # The race, stated: on a busy machine the loop may stall (starved) just before the
    # write, and the watchdog's capture of that stall releases the write at once; the
    # write still hangs _HANG_S after the loop's last beat, and a stall's lag is its wall
    # time less one heartbeat period (seen: 0.2969 s at load 6).
    assert at_writer[0].lag_s >= _HANG_S - PERIOD_S
    assert manifest.validity is not None
    reasons = {r.code: r.message for r in manifest.validity.reasons}
    assert "client_loop_stall" in reasons  # the stall is above the caveat's 250 ms
    if health.loop_stalls[0] is at_writer[0] and at_writer[0].kind == "blocked":
        assert "in a blocking call at " in reasons["client_loop_stall"]
        assert " in replay/load/_writer.py:" in reasons["client_loop_stall"]
    lines = (out / "requests.jsonl").read_bytes().splitlines()
    assert len({orjson.loads(x)["id"] for x in lines}) == len(lines) > 0
