"""Files a command writes where the user named them: nothing already there is
replaced without ``--force`` (a workload, an experiment file), and a refused
command leaves nothing behind."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from replay.errors import ConfigError, UserError

__all__ = ["check_output_dir", "check_output_file", "kept_unless_refused", "refuse_existing"]

_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG})
"""A failing disk, not a wrong path: raised as is (``replay.cli.main``: exit 4)."""


def _nearest(p: Path) -> Path:
    """``p`` or its closest ancestor that exists (where a new path would be made)."""
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def _writable_dir(d: Path, flag: str, shown: Path) -> None:
    """``d`` (existing, or made later under its nearest existing ancestor) can hold new
    files: checked by making one, as the permission bits alone mislead (root, /sys)."""
    base = _nearest(d)
    if not base.is_dir():
        raise ConfigError(f"{flag} {shown}: {base} is not a directory")
    try:
        fd, probe = _probe(base)
    except OSError as exc:
        if exc.errno in _DISK_ERRNOS:
            raise
        raise ConfigError(f"{flag} {shown}: cannot write in {base}: {exc.strerror or exc}") \
            from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def _probe(base: Path) -> tuple[int, str]:
    import tempfile

    return tempfile.mkstemp(prefix=".agentreplay-probe-", dir=base)


def check_output_file(path: str | Path, flag: str, force: bool = False) -> None:
    """Before any work: ``path`` can be written as a file (not a directory, its parent a
    directory that takes new files, an existing file replaced only with ``force``); one
    line naming the flag otherwise, so no fit or simulation is lost to a bad path."""
    p = Path(path)
    if p.is_dir():  # even with force: a directory is not replaced by a file
        raise ConfigError(f"{flag} {p}: is a directory; give a file path")
    refuse_existing(p, flag, force)
    if p.exists() and not p.is_file():
        return  # a device or a pipe, written to (refuse_existing)
    if p.exists():
        try:
            with open(p, "ab"):
                pass
        except OSError as exc:
            if exc.errno in _DISK_ERRNOS:
                raise
            raise ConfigError(f"{flag} {p}: cannot write it: {exc.strerror or exc}") \
                from None
        return
    _writable_dir(p.parent, flag, p)


def check_output_dir(path: str | Path, flag: str) -> None:
    """Before any work: ``path`` is, or can be made as, a directory that takes new files."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{flag} {p}: is a file, not a directory; give a directory")
    _writable_dir(p, flag, p)


def refuse_existing(path: str | Path, flag: str, force: bool) -> None:
    """Refuse to replace an existing file (a device such as /dev/null, or a pipe, is written to,
    not replaced) unless ``force``; the message names the flag and the fix."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except OSError:
        return
    if force or stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):  # written to, not replaced
        return
    what = "a directory" if stat.S_ISDIR(mode) else "exists"
    if stat.S_ISDIR(mode):
        raise ConfigError(f"{flag} {p}: is {what}; give a file path")
    raise ConfigError(f"{flag} {p}: {what}; --force replaces it, or give another path")


@contextlib.contextmanager
def kept_unless_refused(path: Path) -> Iterator[None]:
    """Inside, ``path`` may be (re)written; when the block ends in a user error (a
    refused resume, unfair arms, an unreachable server) it is put back as it was:
    restored, or removed with the folders made for it."""
    try:
        before: bytes | None = path.read_bytes()
    except OSError:
        before = None
    missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    try:
        yield
    except UserError:
        with contextlib.suppress(OSError):
            if before is not None:
                path.write_bytes(before)
            else:
                path.unlink(missing_ok=True)
                for folder in missing:  # innermost first; only those left empty
                    folder.rmdir()
        raise
