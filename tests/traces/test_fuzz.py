"""Random corruptions of real and written files: only TraceError comes out."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fuzz import examples
from traces import (
    TraceError,
    generate,
    import_azure,
    import_mooncake,
    import_tracelab,
    import_weka,
    iter_sessions,
    write_workload,
)

# TRACES_FUZZ_EXAMPLES=1000 for a longer hunt; the default keeps the run short.
FUZZ = settings(max_examples=examples(int(os.environ.get("TRACES_FUZZ_EXAMPLES", "40"))),
                deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

_WEIRD = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False),
    st.text(max_size=5),
    # Fresh containers each time: a later mutation may write into them.
    st.builds(list), st.builds(dict), st.builds(lambda: [1, "x", None]),
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:6]):
            out += _paths(v, (*prefix, i))
    return out


def _set(obj: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    if not path:
        return value
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return obj


@st.composite
def _json_mutation(draw: st.DrawFn, obj: Any) -> Any:
    obj = json.loads(json.dumps(obj))
    paths = _paths(obj)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(obj)
        path = paths[draw(st.integers(0, len(paths) - 1))]
        obj = _set(obj, path, draw(_WEIRD), delete=bool(path) and draw(st.booleans()))
    return obj


@st.composite
def _byte_mutation(draw: st.DrawFn, data: bytes) -> bytes:
    kind = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
    pos = draw(st.integers(0, max(0, len(data) - 1)))
    if kind == "flip":
        return data[:pos] + bytes([draw(st.integers(0, 255))]) + data[pos + 1:]
    if kind == "cut":
        return data[:pos]
    if kind == "insert":
        return data[:pos] + draw(st.binary(min_size=1, max_size=8)) + data[pos:]
    return data[:pos] + data[pos + draw(st.integers(1, 50)):]


def _consume(load: Callable[[Path], Any], path: Path) -> None:
    try:
        result = load(path)
        for _ in getattr(result, "sessions", result):
            pass
    except TraceError:
        pass


def _small_weka(sample_traces: Path) -> dict[str, Any]:
    return json.loads((sample_traces / "weka" / "trace_0103.json").read_text())


def _weka_with_subagent(sample_traces: Path) -> dict[str, Any]:
    obj = json.loads((sample_traces / "weka" / "trace_0277.json").read_text())
    obj["requests"] = obj["requests"][:2]  # one request and its subagent
    obj["requests"][1]["requests"] = obj["requests"][1]["requests"][:2]
    return obj


@pytest.fixture(scope="module")
def samples(sample_traces: Path) -> dict[str, Any]:
    mooncake = (sample_traces / "mooncake" / "conversation_trace.jsonl").read_text()
    azure = (sample_traces / "azure" / "AzureLLMInferenceTrace_code.csv").read_text()
    tracelab = (sample_traces / "tracelab" / "round_trace.jsonl").read_text()
    return {
        "weka": _small_weka(sample_traces),
        "weka_sub": _weka_with_subagent(sample_traces),
        "mooncake": [json.loads(x) for x in mooncake.splitlines()[:4]],
        "azure": "\n".join(azure.splitlines()[:5]) + "\n",
        "tracelab": [json.loads(x) for x in tracelab.splitlines()[:3]],
    }


@FUZZ
@given(data=st.data())
def test_weka_json_corruption(tmp_path: Path, samples: dict[str, Any], data: st.DataObject
                              ) -> None:
    obj = data.draw(_json_mutation(samples[data.draw(st.sampled_from(["weka", "weka_sub"]))]))
    path = tmp_path / "w.json"
    path.write_text(json.dumps(obj))
    _consume(lambda p: import_weka(p, max_context=data.draw(st.sampled_from([None, 20_000]))),
             path)


@FUZZ
@given(data=st.data())
def test_weka_byte_corruption(tmp_path: Path, samples: dict[str, Any], data: st.DataObject
                              ) -> None:
    path = tmp_path / "w.json"
    path.write_bytes(data.draw(_byte_mutation(json.dumps(samples["weka_sub"]).encode())))
    _consume(import_weka, path)


@FUZZ
@given(data=st.data())
def test_jsonl_importers_corruption(tmp_path: Path, samples: dict[str, Any],
                                    data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(["mooncake", "tracelab"]))
    rows = data.draw(_json_mutation(samples[name]))
    text = "\n".join(json.dumps(r) for r in rows) if isinstance(rows, list) else json.dumps(rows)
    raw = text.encode()
    if data.draw(st.booleans()):
        raw = data.draw(_byte_mutation(raw))
    path = tmp_path / "t.jsonl"
    path.write_bytes(raw)
    load = {"mooncake": import_mooncake, "tracelab": import_tracelab}[name]
    _consume(lambda p: load(p, max_context=data.draw(st.sampled_from([None, 2_048]))), path)


@FUZZ
@given(data=st.data())
def test_azure_corruption(tmp_path: Path, samples: dict[str, Any], data: st.DataObject
                          ) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes(data.draw(_byte_mutation(samples["azure"].encode())))
    _consume(import_azure, path)


@pytest.fixture(scope="module")
def workload_lines(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    header, sessions = generate(sessions=2, seed=3, prompt_scale=0.01, max_context=4096,
                                think_scale=0.1)
    path = tmp_path_factory.mktemp("w") / "w.jsonl"
    write_workload(path, header, sessions)
    return [json.loads(x) for x in path.read_text().splitlines()]


@FUZZ
@given(data=st.data())
def test_workload_reader_corruption(tmp_path: Path, workload_lines: list[Any],
                                    data: st.DataObject) -> None:
    lines = data.draw(_json_mutation(workload_lines))
    text = "\n".join(json.dumps(x) for x in lines) if isinstance(lines, list) \
        else json.dumps(lines)
    raw = text.encode()
    if data.draw(st.booleans()):
        raw = data.draw(_byte_mutation(raw))
    path = tmp_path / "w.jsonl"
    path.write_bytes(raw)
    _consume(iter_sessions, path)


@FUZZ
@given(max_context=st.integers(2048, 1_100_000), block_size=st.sampled_from([16, 64, 256]),
       seed=st.integers(0, 2**32 - 1), scale=st.sampled_from([None, 0.5, 1.0]))
def test_generate_any_context_is_valid_or_refused(max_context: int, block_size: int, seed: int,
                                                  scale: float | None) -> None:
    """Auto-scaled: always valid; an explicit prompt scale may be refused, never crash."""
    from traces import check_session

    try:
        _, sessions = generate(sessions=4, seed=seed, max_context=max_context,
                               block_size=block_size, prompt_scale=scale)
        got = list(sessions)
    except TraceError as exc:
        assert scale is not None and exc.field == "max_context"
        return
    for s in got:
        check_session(s, block_size)
        chains = [s.requests, *(sub.requests for r in s.requests for sub in r.subagents)]
        assert all(r.prompt_tokens + r.output_tokens <= max_context
                   for chain in chains for r in chain)
