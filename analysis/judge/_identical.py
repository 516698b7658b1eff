"""A/A: arms that do not differ at all, named so.

Two arms with the same configuration, the decode backend included (or one server
behind every arm: a URL typed twice) pass every fairness check, and a comparison
of them would read "only the decode backend differs" with nothing differing.
``identical_arms`` says when that is so; what such arms measure apart is the
noise floor of the setup, never a backend's effect.
"""

from __future__ import annotations

from collections.abc import Sequence

from analysis.schema import RunManifest

__all__ = ["aa_sentence", "identical_arms"]


def identical_arms(manifests: Sequence[RunManifest], verdicts: Sequence[str],
                   verified: bool) -> bool:
    """Two or more arms, no allowed difference (the decode backend), and either verified
    configurations or one server behind all of them (unverified: nothing else tells);
    ``verdicts``: those of the runs' configuration differences."""
    if len({m.label for m in manifests}) < 2 or "allowed" in verdicts:
        return False  # the backend differs (a server relaunched on one port is not A/A)
    return verified or len({tuple(sorted(r.target for r in m.replicas) or [m.target])
                            for m in manifests}) == 1


def aa_sentence(manifests: Sequence[RunManifest], same_gpu: bool,
                gpus: list[int | None]) -> str:
    """The fairness sentence of an A/A run (in place of "only the decode backend differs")."""
    arms = ", ".join(dict.fromkeys(m.label for m in manifests))
    one = len({m.target for m in manifests}) == 1
    gpu_text = f"same GPU count ({gpus[0]})" if same_gpu else "GPU counts unknown"
    return (f"A/A run: the arms ({arms}) do not differ at all ({gpu_text}, same model, "
            "workload and load, and the same decode backend"
            + (f"; every arm is one server, {manifests[0].target}" if one else "")
            + "): what they measure apart is the noise floor, not a backend's effect.")

