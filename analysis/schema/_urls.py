"""URLs as they may be written: a server URL can carry a user and password
(``http://user:secret@host``) or a token in its query; results, experiment files and
reports keep only scheme, host, port and path. The one place that is decided."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["public_url", "scrub_urls"]

_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/@\"'<>]*@")


def public_url(url: str) -> str:
    """``url`` without user, password, query or fragment (unchanged when it does not
    parse as a URL with a host: a label or a path is not a secret)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return _USERINFO.sub(r"\1", url)
    if not parts.scheme or not parts.netloc:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def scrub_urls(text: str) -> str:
    """Free text with the user info of every URL in it removed (an experiment file or a
    log shown in a report)."""
    return _USERINFO.sub(r"\1", text)
