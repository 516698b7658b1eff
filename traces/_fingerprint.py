"""The workload fingerprint: sha256 over canonical content, computed incrementally.

Same content gives the same hex digest in any process on any machine (never
Python's ``hash()``, which is salted per process). Canonical content is the
block size, the arrival mode, then each session's JSON with sorted keys and
default-valued fields left out (so adding an optional field to the model later
does not change the fingerprint of existing files).
"""

from __future__ import annotations

import hashlib

import orjson

from traces._models import Session

__all__ = ["Fingerprinter", "canonical_session_json", "session_dict"]

_TAG = b"agentreplay-workload-fingerprint/1\n"


def session_dict(session: Session) -> dict[str, object]:
    """The JSON-ready form written to files and hashed (defaults omitted)."""
    return session.model_dump(mode="json", exclude_defaults=True)


def canonical_session_json(session: Session) -> bytes:
    """Canonical bytes of one session: sorted keys, no whitespace."""
    return orjson.dumps(session_dict(session), option=orjson.OPT_SORT_KEYS)


class Fingerprinter:
    """Feed sessions in file order; ``hexdigest`` gives the workload fingerprint."""

    def __init__(self, block_size: int, arrival: str) -> None:
        self._h = hashlib.sha256(_TAG)
        self._h.update(
            orjson.dumps({"arrival": arrival, "block_size": block_size},
                         option=orjson.OPT_SORT_KEYS)
        )
        self._h.update(b"\n")
        self.count = 0

    def update(self, session: Session) -> None:
        self._h.update(canonical_session_json(session))
        self._h.update(b"\n")
        self.count += 1

    def update_raw(self, data: bytes) -> None:
        """Feed canonical session lines (each ending with a newline) as bytes."""
        self._h.update(data)

    def hexdigest(self) -> str:
        return self._h.hexdigest()
