"""What a run label and a server URL may be, checked before any load: a label names run
directories (so it cannot hide or leave them), a URL must say its scheme (and the error
says what to write)."""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["MAX_LABEL_CHARS", "checked_url", "label_problem", "split_arm", "url_problem"]

MAX_LABEL_CHARS = 64
_LABEL_PUNCT = frozenset("-_.+")


def label_problem(label: str) -> str | None:
    """Why ``label`` cannot name an arm (None when it can). A label names run directories
    (``runs/<label>-u4-r0``) that are found again by listing: one starting with a dot is
    hidden (skipped when runs are read back), a path separator or ``..`` leaves the
    directory, so labels are letters and digits first, then letters, digits and
    ``- _ . +``, at most 64 characters; checked before any load."""
    if not label:
        return "a label cannot be empty"
    if len(label) > MAX_LABEL_CHARS:
        return f"a label is at most {MAX_LABEL_CHARS} characters (got {len(label)})"
    if not label[0].isalnum():
        return (f"label {label[:40]!r} must start with a letter or digit (a leading "
                f"{label[0]!r} would hide or misplace its run directories)")
    bad = next((c for c in label if not (c.isalnum() or c in _LABEL_PUNCT)), None)
    if bad is not None:
        return (f"label {label[:40]!r} has {bad!r}: use letters, digits and '-', '_', '.', "
                "'+' (a label names run directories)")
    return None


def url_problem(value: str) -> str | None:
    """What is wrong with a server URL, saying what to write (``127.0.0.1:8101`` ->
    ``http://127.0.0.1:8101``); None when it is an http(s) URL with a host."""
    text = value.strip()
    parts = urlsplit(text)
    if parts.scheme in ("http", "https") and parts.hostname:
        return None
    rest = text.split("://", 1)[1] if "://" in text else text
    if not rest or rest.startswith("/"):
        return f"{value!r} is not an http(s) URL such as http://host:8000"
    why = f"scheme {text.split('://', 1)[0]!r}" if "://" in text else "no scheme"
    return (f"{value!r} is not an http(s) URL ({why}): write http://{rest} "
            f"(or https://{rest})")


def checked_url(value: str) -> str:
    problem = url_problem(value)
    parts = urlsplit(value.strip())
    if problem is not None:
        raise ValueError(problem)
    try:
        parts.port  # noqa: B018 - raises on a port outside 0..65535
    except ValueError:
        raise ValueError(f"{value!r}: the port must be a number in 1..65535") from None
    return value.strip()


def split_arm(entry: str) -> tuple[str, str]:
    """``ARM=URL`` -> (arm, URL); a bare URL -> ("", URL)."""
    arm, eq, url = entry.partition("=")
    if eq and "://" not in arm:
        return arm, url
    return "", entry
