"""The Kimi K3 profiles reproduce vLLM's published decode tables (DESIGN.md "Published
context"): input 1 token, output 1,000, ignore_eos, prefill excluded, aggregate tok/s
of the TP16 group. On the pure model first, then once through a real server."""

from __future__ import annotations

import aiohttp
import pytest

from replay.client import parse_prometheus
from replay.servers.sim import SimConfig, SimServer, load_profile, modelled_decode
from tests.replay.servers.sim._util import body, run, stream

KIMI = "kimi-k3-gb300-tp16"
DSPARK = "kimi-k3-gb300-tp16-dspark"
PUBLISHED = 0.02  # the tolerance


@pytest.mark.parametrize("batch,fast,ratio", [(1, 256.4, 1.88), (64, 3606.1, 1.62)])
def test_kimi_decode_table(batch: int, fast: float, ratio: float) -> None:
    profile = load_profile(KIMI)
    ls = modelled_decode(profile, "latency_specialized", batch)
    auto = modelled_decode(profile, "auto", batch)
    assert ls.decode_tok_s == pytest.approx(fast, rel=PUBLISHED)
    assert ls.decode_tok_s / auto.decode_tok_s == pytest.approx(ratio, rel=PUBLISHED)
    assert ls.acceptance_length is None and profile.gpu_count == 16


def test_dspark_decode_table_at_batch_1() -> None:
    profile = load_profile(DSPARK)
    assert profile.speculative is not None
    assert profile.speculative.num_speculative_tokens == 7
    ls = modelled_decode(profile, "latency_specialized", 1)
    auto = modelled_decode(profile, "auto", 1)
    assert ls.decode_tok_s == pytest.approx(842, rel=PUBLISHED)
    assert auto.decode_tok_s == pytest.approx(488, rel=PUBLISHED)
    assert ls.acceptance_length == pytest.approx(6) and auto.acceptance_length == pytest.approx(6)


def test_decode_rate_is_a_lockstep_batch() -> None:
    """At batch b every request decodes at 1/b of the aggregate (they share each step)."""
    point = modelled_decode(load_profile(KIMI), "auto", 8, output_tokens=50)
    assert point.batch == 8
    assert point.per_request_tok_s * 8 == pytest.approx(point.decode_tok_s)


@pytest.mark.sim
@pytest.mark.parametrize("profile_name,backend", [
    (KIMI, "latency_specialized"), (KIMI, "auto"), (DSPARK, "latency_specialized"),
])
def test_served_decode_matches_the_model(profile_name: str, backend: str) -> None:
    """The decode benchmark through HTTP: the truth log's modelled step times give the
    model's rate (the server runs the same engine) and /metrics' spec-decode counters
    give the acceptance length the profile sets."""
    tokens, scale = 200, 10.0

    async def go() -> tuple[list[int], dict[str, float]]:
        async with SimServer(SimConfig(profile=profile_name, backend=backend,
                                       time_scale=scale)) as srv, \
                aiohttp.ClientSession() as s:
            got = await stream(s, srv.url + "/v1/completions", body([100], tokens))
            assert got.done and len(got.token_ids()) == tokens
            async with s.get(srv.url + "/metrics") as r:
                metrics = parse_prometheus(await r.text())
            return srv.truth[0].step_model_ns, metrics
    step_model_ns, metrics = run(go())
    decode_s = sum(step_model_ns[1:]) / 1e9 * scale  # the steps after the first token
    want = modelled_decode(load_profile(profile_name), backend, 1, output_tokens=tokens)
    assert (tokens - 1) / decode_s == pytest.approx(want.decode_tok_s, rel=1e-5)  # ns ints
    drafts = metrics.get("vllm:spec_decode_num_drafts_total")
    if want.acceptance_length is None:
        assert drafts is None
    else:
        assert drafts
        accepted = metrics["vllm:spec_decode_num_accepted_tokens_total"]
        assert 1 + accepted / drafts == pytest.approx(want.acceptance_length)
        assert metrics["vllm:spec_decode_num_draft_tokens_total"] == 7 * drafts


def test_modelled_decode_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        modelled_decode(load_profile(KIMI), "auto", 0)
    with pytest.raises(ValueError):
        modelled_decode(load_profile(KIMI), "auto", 1, output_tokens=1)
