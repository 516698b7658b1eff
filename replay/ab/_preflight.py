"""Before a comparison loads anything: ask every arm's servers who they are.

An arm is one server (``LABEL=URL``) or a fleet of replicas measured as one
(``LABEL=URL1,URL2``). Every replica is probed; the replicas of one arm must be
alike (``replay.load.check_fleet``: not overridable, a fleet of unlike servers
is not one thing to measure), and the arms must differ only in the decode
backend (``analysis.judge_fairness``, which also holds every replica of every
arm to its arm's first).
"""

from __future__ import annotations

import asyncio
import os
import urllib.error
import urllib.request
from collections.abc import Sequence

from analysis import LoadSettings, RunManifest, judge_fairness
from analysis.judge import FairnessVerdict
from analysis.schema import ClockInfo, WorkloadRef
from replay.ab._options import CompareOptions
from replay.client import ServerFacts, connect_url, make_session, probe_server, public_target
from replay.errors import ConfigError
from replay.load import check_fleet, describe_fleet, split_targets

__all__ = ["arm_headers", "preflight", "probe_facts", "public_arms", "refuse_identical",
           "reset_prefix_cache", "stand_in"]


def arm_headers(api_key_env: str | None) -> dict[str, str]:
    """The JSON and Bearer headers every request of a comparison carries."""
    headers = {"Content-Type": "application/json"}
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise ConfigError(f"--api-key-env {api_key_env}: that environment variable is not set")
        headers["Authorization"] = f"Bearer {key}"
    return headers


async def probe_facts(urls: Sequence[str], opts: CompareOptions) -> list[ServerFacts]:
    """Each server's facts (``/v1/models``, ``/server_info``), one per URL."""
    headers = arm_headers(opts.api_key_env)
    facts = []
    async with make_session(8, connect_s=30.0) as session:
        for url in urls:
            hdr = dict(headers)
            _, basic = connect_url(url)
            if basic is not None and "Authorization" not in hdr:
                hdr["Authorization"] = basic
            facts.append(await probe_server(session, url, hdr, model=opts.model,
                                            vocab_size=opts.vocab_size, block_size=None))
    return facts


def stand_in(label: str, url: str, facts: Sequence[ServerFacts],
             opts: CompareOptions) -> RunManifest:
    """A manifest as a run of this arm would write it, before any load: fairness is
    judged on it (``url`` and ``facts``: the arm's replicas, in order)."""
    urls = split_targets(url)
    first = facts[0]
    manifest = RunManifest(
        run_id=f"preflight-{label}", label=label, target=public_target(urls[0]),
        model=first.model, api=opts.api, server_info=first.server_info,
        server_models=first.models, gpu_count=first.gpu_count, simulated=first.simulated,
        workload=WorkloadRef(fingerprint="same"),
        load=LoadSettings(users=1, duration_s=opts.duration_s, warmup_s=opts.warmup_s,
                          drain_s=opts.drain_s or 0.0, seed=opts.seed, api=opts.api),
        clock=ClockInfo(t0_wall="", t0_monotonic_ns=0), started_at="", tool_version="",
    )
    describe_fleet(manifest, urls, facts, opts.routing)
    return manifest


def preflight(arms: Sequence[tuple[str, str]], opts: CompareOptions, *,
              launch_commands: Sequence[Sequence[str]] | None = None) -> FairnessVerdict:
    """Fetch every replica's ``/v1/models`` and ``/server_info`` and judge fairness
    before load.

    A fleet arm whose replicas differ is a ``TargetError``; arms that differ beyond the
    decode backend raise ``FairnessError`` (exit 2, naming the differing fields) unless
    ``allow_unfair`` is set. Launched arms pass their command lines, which are diffed too.
    """
    manifests = []
    for label, url in arms:
        urls = split_targets(url, f"--arm {label}")
        facts = asyncio.run(probe_facts(urls, opts))
        manifest = stand_in(label, url, facts, opts)
        check_fleet(manifest.replicas, urls, f"--arm {label}")
        manifests.append(manifest)
    verdict = judge_fairness(manifests, allow_unfair=opts.allow_unfair,
                             require_config=len(arms) > 1, launch_commands=launch_commands)
    refuse_identical(verdict, arms, opts)
    return verdict


def refuse_identical(verdict: FairnessVerdict, arms: Sequence[tuple[str, str]],
                     opts: CompareOptions) -> None:
    """Arms that do not differ at all (an A/A run, often one URL typed twice) are a
    ``ConfigError`` naming them, unless ``--allow-identical`` asks for a noise floor."""
    if not verdict.identical or opts.allow_identical:
        return
    urls = [u for _, u in arms]
    same = len(set(urls)) == 1
    raise ConfigError(
        "the arms " + ", ".join(f"{label}={public_target(url)}" for label, url in arms)
        + (" are one server" if same else " do not differ at all (same configuration, "
           "same decode backend)")
        + ": nothing would be compared; point each --arm at its own server, or pass "
        "--allow-identical for an A/A run that measures the noise floor")


def reset_prefix_cache(url: str, api_key_env: str | None = None) -> bool:
    """``POST /reset_prefix_cache`` to the server (every replica of ``URL1,URL2``); True
    when every one did it (vLLM needs dev mode)."""
    done = True
    for one in split_targets(url):
        root, basic = connect_url(one)
        headers = arm_headers(api_key_env)
        if basic is not None and "Authorization" not in headers:
            headers["Authorization"] = basic
        req = urllib.request.Request(f"{root}/reset_prefix_cache", data=b"", method="POST",
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                done = done and 200 <= resp.status < 300
        except (urllib.error.URLError, OSError):
            done = False
    return done


def public_arms(arms: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Label -> the arm's URLs as stored in ``comparison.json`` (credentials removed)."""
    return {label: ",".join(public_target(u) for u in split_targets(url))
            for label, url in arms}
