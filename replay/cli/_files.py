"""Files a command writes where the user named them: nothing already there is
replaced without ``--force`` (a workload, an experiment file), and a refused
command leaves nothing behind."""

from __future__ import annotations

import contextlib
import stat
from collections.abc import Iterator
from pathlib import Path

from replay.errors import ConfigError, UserError

__all__ = ["kept_unless_refused", "refuse_existing"]


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
