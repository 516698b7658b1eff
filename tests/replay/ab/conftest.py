"""Shared fixtures: a tiny workload for the ``small`` simulated profile, and sim servers."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from replay.servers.sim import SimServerProcess, load_profile
from traces import generate, write_workload

TIME_SCALE = 4.0


@pytest.fixture(scope="session")
def tiny_workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("workload") / "tiny.jsonl"
    header, sessions = generate("coding-agent", sessions=4, seed=1, block_size=16,
                                max_context=4096, prompt_scale=0.02, think_scale=0.01,
                                output_scale=0.2)
    write_workload(path, header, sessions)
    return path


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


def profile_variant(tmp: Path, **changes: object) -> Path:
    """The ``small`` profile with some figures changed, as a profile file."""
    data = load_profile("small").model_dump(mode="json")
    data.update(changes)
    path = tmp / "small-variant.json"
    path.write_text(json.dumps(data))
    return path


def exit_for(out: Path) -> int:
    """The exit code ``compare`` owes for the comparison in ``out``: 3 when its summary
    is stamped invalid (a starved simulator on a busy machine can do that), else 0."""
    summary = orjson.loads((out / "summary.json").read_bytes())
    return 3 if summary.get("validity", {}).get("verdict") == "invalid" else 0
