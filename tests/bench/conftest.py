"""Load the bench scripts (bench/ is a folder of scripts, not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> ModuleType:
    key = f"_bench_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def peers() -> ModuleType:
    return _load("peers")


@pytest.fixture(scope="session")
def stub() -> ModuleType:
    return _load("_stub_server")


@pytest.fixture(scope="session")
def agentx() -> ModuleType:
    return _load("agentx_crosscheck")


@pytest.fixture(scope="session")
def read_path() -> ModuleType:
    return _load("read_path")


@pytest.fixture(scope="session")
def real_interval() -> ModuleType:
    return _load("_real_interval")


@pytest.fixture(scope="session")
def real_spread() -> ModuleType:
    return _load("_real_spread")
