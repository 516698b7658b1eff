"""Everything a launched comparison can check before any server starts.

Starting vLLM takes from a minute (a tiny model on CPU) to many minutes (a large
model on GPUs); a mistake found after that is expensive and, worse, used to leave
a half-written comparison behind. So the launch plan is resolved up front: the
model's files (vocabulary, longest context, fingerprint), the vLLM version, the
``max_model_len`` the servers will get, and whether every request of the
workload fits in it. :func:`launch_facts` returns what resume must remember.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from replay.errors import ConfigError
from replay.servers.launch._model_files import (
    ModelFiles,
    max_model_len_arg,
    read_model_files,
    vllm_version,
)
from replay.servers.launch._secrets import redact_args
from traces import Request, iter_sessions

__all__ = ["LaunchFacts", "check_workload_fits", "launch_facts"]


@dataclass(frozen=True)
class LaunchFacts:
    """What a launched comparison knows before starting a server."""

    model: str
    files: ModelFiles | None
    vllm_version: str | None
    max_model_len: int | None
    vocab_size: int | None

    def settings(self, extra_args: Sequence[str]) -> dict[str, object]:
        """The entries resume compares: any change is refused before a launch."""
        return {
            "launch_model": self.files.path if self.files else self.model,
            "launch_model_fingerprint": self.files.fingerprint if self.files else None,
            "launch_vllm_version": self.vllm_version,
            "launch_vllm_args": redact_args(extra_args),  # written to comparison.json
        }


def _walk(requests: Sequence[Request]) -> Iterator[tuple[int, Request]]:
    for turn, req in enumerate(requests):
        yield turn, req
        for sub in req.subagents:
            yield from _walk(sub.requests)


def check_workload_fits(workload: str | os.PathLike[str], max_model_len: int,
                        where: str) -> None:
    """Refuse a workload with a request longer than ``max_model_len`` (prompt + output)."""
    path = os.fspath(workload)
    for session in iter_sessions(path):
        for turn, req in _walk(session.requests):
            need = req.prompt_tokens + req.output_tokens
            if need > max_model_len:
                raise ConfigError(
                    f"{path}: session {session.id!r} request {turn} needs {need} tokens "
                    f"({req.prompt_tokens} prompt + {req.output_tokens} output) but the "
                    f"launched servers get max_model_len {max_model_len} ({where}); "
                    "raise --max-model-len after -- or use a shorter workload")


def launch_facts(model: str, launcher: Sequence[str], extra_args: Sequence[str],
                 workload: str | os.PathLike[str], vocab_override: int | None) -> LaunchFacts:
    """Read the model and vLLM install, check the workload fits; nothing is started."""
    files = read_model_files(model)
    arg_len = max_model_len_arg(extra_args)
    limit = arg_len if arg_len is not None else (files.max_context if files else None)
    if limit is not None:
        where = "--max-model-len" if arg_len is not None else \
            "the model's config.json max_position_embeddings"
        check_workload_fits(workload, limit, where)
    vocab = vocab_override if vocab_override is not None else (
        files.vocab_size if files else None)
    return LaunchFacts(model=model, files=files, vllm_version=vllm_version(launcher),
                       max_model_len=limit, vocab_size=vocab)
