"""Workload files (JSONL): a header line, then one session a line.

Reading streams: ``iter_sessions`` parses one line at a time, checks each
session's consistency, and verifies the session count and the fingerprint when
it reaches the end (so a 10,000-session file is never held in memory). Writing
streams too: the body goes to a temporary file while the fingerprint is
computed, then the header and the body are joined into the target file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

import orjson
from pydantic import ValidationError

from traces._checks import check_session
from traces._errors import TraceError
from traces._fingerprint import Fingerprinter, canonical_session_json
from traces._lines import bounded_lines, read_line
from traces._models import FORMAT_VERSION, Session, Workload, WorkloadHeader

__all__ = [
    "iter_sessions",
    "read_header",
    "read_workload",
    "validate_workload",
    "write_workload",
]

PathLike = str | os.PathLike[str]


def _parse_object(raw: bytes, file: str, line: int) -> dict[str, object]:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise TraceError(f"invalid JSON ({exc})", file=file, line=line) from None
    if not isinstance(obj, dict):
        raise TraceError(
            f"expected a JSON object, got {type(obj).__name__}", file=file, line=line
        )
    return obj


def _parse_header(raw: bytes, file: str) -> WorkloadHeader:
    obj = _parse_object(raw, file, 1)
    version = obj.get("format_version")
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise TraceError(
            f"format_version {version} is newer than this tool's {FORMAT_VERSION}",
            file=file, line=1, field="format_version",
        )
    if obj.get("kind") != "agentreplay-workload":
        raise TraceError(
            "not an agentreplay workload (first line must be the header with "
            "kind 'agentreplay-workload')", file=file, line=1, field="kind",
        )
    try:
        header = WorkloadHeader.model_validate(obj)
    except ValidationError as exc:
        raise TraceError.from_validation(exc, file=file, line=1) from None
    if not header.fingerprint:
        raise TraceError("missing fingerprint", file=file, line=1, field="fingerprint")
    return header


def _open(path: PathLike) -> tuple[IO[bytes], str]:
    name = os.fspath(path)
    try:
        return open(name, "rb"), name  # noqa: SIM115 - closed by the callers
    except OSError as exc:
        raise TraceError(f"cannot open ({exc.strerror})", file=name) from None


def read_header(path: PathLike) -> WorkloadHeader:
    """The header line of a workload file (checked, not the body)."""
    fh, name = _open(path)
    with fh:
        first = read_line(fh, name, 1)
    if not first.strip():
        raise TraceError("empty file (no header line)", file=name, line=1, field="header")
    return _parse_header(first, name)


def iter_sessions(path: PathLike) -> Iterator[Session]:
    """Yield the sessions of a workload file one at a time, checking everything.

    Each line is validated as it is read; the session count and the fingerprint
    are verified after the last line, so a consumer that reads to the end has
    seen a verified workload (a TraceError is raised otherwise).
    """
    fh, name = _open(path)
    with fh:
        first = read_line(fh, name, 1)
        if not first.strip():
            raise TraceError("empty file (no header line)", file=name, line=1, field="header")
        header = _parse_header(first, name)
        fp = Fingerprinter(header.block_size, header.arrival)
        for lineno, raw in bounded_lines(fh, name, 2):
            if not raw.strip():
                continue
            obj = _parse_object(raw, name, lineno)
            try:
                session = Session.model_validate(obj)
            except ValidationError as exc:
                raise TraceError.from_validation(exc, file=name, line=lineno) from None
            check_session(session, header.block_size, file=name, line=lineno)
            fp.update(session)
            yield session
    if fp.count != header.sessions:
        raise TraceError(
            f"header says {header.sessions} sessions but the file holds {fp.count}",
            file=name, line=1, field="sessions",
        )
    if fp.hexdigest() != header.fingerprint:
        raise TraceError(
            "fingerprint does not match the content (file edited or truncated?)",
            file=name, line=1, field="fingerprint",
        )


def validate_workload(path: PathLike) -> WorkloadHeader:
    """Read a whole workload file, checking every line; returns its header."""
    for _ in iter_sessions(path):
        pass
    return read_header(path)


def read_workload(path: PathLike) -> Workload:
    """Load a small workload into memory (stream large ones with iter_sessions)."""
    sessions = tuple(iter_sessions(path))
    return Workload(header=read_header(path), sessions=sessions)


def write_workload(
    path: PathLike,
    header: WorkloadHeader | Callable[[], WorkloadHeader],
    sessions: Iterable[Session],
) -> WorkloadHeader:
    """Stream sessions to ``path`` with a header carrying count and fingerprint.

    ``header`` may be a callable, for importers whose header params count what
    they saw (truncations...): it is called once before the sessions are read
    (for the block size every session is checked against) and once after.
    Returns the header as written. The target is replaced atomically (a device such
    as /dev/null is written to instead).
    """
    try:
        return _write(Path(path), header, sessions)
    except OSError as exc:
        raise TraceError(f"cannot write ({exc.strerror or exc})", file=os.fspath(path)) \
            from None


def _new_file_mode() -> int:
    """The mode ``open()`` gives a new file: 0666 less the umask (0644 usually)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _write(
    target: Path,
    header: WorkloadHeader | Callable[[], WorkloadHeader],
    sessions: Iterable[Session],
) -> WorkloadHeader:
    # a device or a pipe (``-o /dev/null``) is written to, never replaced: an atomic
    # rename over it would put a regular file where the device was
    special = target.exists() and not target.is_file()
    directory = target.parent if str(target.parent) else Path(".")
    body = tempfile.NamedTemporaryFile(  # noqa: SIM115 - removed in finally
        "w+b", dir=None if special else directory, prefix=f".{target.name}.",
        suffix=".body", delete=False
    )
    final_tmp: str | None = None
    try:
        count = 0
        block_size = header.block_size if isinstance(header, WorkloadHeader) else \
            header().block_size
        with body:
            for session in sessions:
                check_session(session, block_size, file=str(target),
                              line=count + 2)
                body.write(canonical_session_json(session))
                body.write(b"\n")
                count += 1
            head = header() if callable(header) else header
            # The body lines are the canonical bytes, so hashing the body file
            # gives the same digest the reader computes from parsed sessions.
            fp = Fingerprinter(head.block_size, head.arrival)
            body.flush()
            body.seek(0)
            while chunk := body.read(1 << 20):
                fp.update_raw(chunk)
            head = head.model_copy(update={"fingerprint": fp.hexdigest(), "sessions": count})
            body.seek(0)
            if special:
                with open(target, "wb") as dev:
                    dev.write(orjson.dumps(head.model_dump(mode="json")))
                    dev.write(b"\n")
                    shutil.copyfileobj(body, dev, 1 << 20)
                return head
            with tempfile.NamedTemporaryFile(
                "wb", dir=directory, prefix=f".{target.name}.", suffix=".tmp", delete=False
            ) as out:
                final_tmp = out.name
                os.fchmod(out.fileno(), _new_file_mode())  # not the temp file's 0600
                out.write(orjson.dumps(head.model_dump(mode="json")))
                out.write(b"\n")
                shutil.copyfileobj(body, out, 1 << 20)
        os.replace(final_tmp, target)
        final_tmp = None
        return head
    finally:
        os.unlink(body.name)
        if final_tmp is not None:
            os.unlink(final_tmp)
