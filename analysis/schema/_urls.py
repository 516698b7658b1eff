"""URLs as they may be written: a server URL can carry a user and password
(``http://user:secret@host``) or a token in its query; results, experiment files and
reports keep only scheme, host, port and path. The one place that is decided."""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

__all__ = ["REDACTED", "duplicate_replica", "is_secret_name", "public_url", "replica_key",
           "scrub_secrets", "scrub_urls"]

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


_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", "::"})
"""Names of this machine: ``http://localhost:8000`` and ``http://127.0.0.1:8000`` are one
server (0.0.0.0 / :: as a target reach it too)."""
_DEFAULT_PORT = {"http": 80, "https": 443}


def replica_key(url: str) -> str:
    """The server ``url`` reaches, as compared for duplicates in a replica list:
    scheme and host in lower case, a loopback alias as one name, the scheme's default
    port written out, and no user info, query, trailing slash or ``/v1`` (the API
    root the tool appends itself). Two URLs with one key are one server, whose
    figures a fleet of both would halve per GPU."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return url.strip()
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if host in _LOOPBACK:
        host = "loopback"
    path = parts.path.rstrip("/")
    while path.endswith("/v1"):
        path = path[:-3].rstrip("/")
    return f"{scheme}://{host}:{port or _DEFAULT_PORT.get(scheme, 0)}{path}"


def duplicate_replica(urls: Sequence[str]) -> str | None:
    """Why ``urls`` name one server twice (None when they do not): the one rule for
    ``run --target`` repeated and ``compare --arm L=U1,U2``, comparing
    :func:`replica_key` of each, since a fleet of one server counted twice halves every
    per-GPU figure."""
    keys = [replica_key(u) for u in urls]
    for i, key in enumerate(keys):
        if key in keys[:i]:
            j = keys.index(key)
            a, b = public_url(urls[j]).rstrip("/"), public_url(urls[i]).rstrip("/")
            same = "is given twice" if a == b else f"and {a} are the same server"
            return f"{b} {same}; give each replica once"
    return None


def scrub_urls(text: str) -> str:
    """Free text with the user info of every URL in it removed (an experiment file or a
    log shown in a report)."""
    return _USERINFO.sub(r"\1", text)


REDACTED = "***"
"""What a secret is written as."""
_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pwd",
                           "credential", "credentials"})
_NAME = r"[A-Za-z][\w.-]*"


def is_secret_name(name: str) -> bool:
    """A flag, JSON key or environment variable whose value is a secret: one of its
    words (split at ``-``, ``_``, ``.``) is key, token, secret, password or credential
    (``--api-key``, ``--hf-token``, ``HF_TOKEN``, ``OPENAI_API_KEY``; not
    ``--max-num-batched-tokens`` nor ``--tokenizer``, nor ``--api-key-env``: that one
    names the variable that holds the key)."""
    words = re.split(r"[-_.]+", name.strip("-").lower())
    return words[-1] != "env" and any(w in _SECRET_WORDS for w in words)


def _value(m: re.Match[str]) -> str:
    name, sep = m.group("name"), m.group("sep")
    if not sep or not is_secret_name(name):
        return m.group(0)
    if not sep.strip() and m.group("pre") != "--":  # "the key is": prose, not a setting
        return m.group(0)
    return f"{m.group('pre')}{name}{sep}{REDACTED}"


# --flag VALUE, --flag=VALUE, "--flag", "VALUE" (a TOML or Python list), "key": "VALUE"
# (JSON, also escaped inside a string), NAME=VALUE (an environment), key = "VALUE" (TOML)
_SECRET_VALUE = re.compile(
    r"(?P<pre>--|\b|\\?[\"'])(?P<name>" + _NAME + r")(?![\w.-])"
    r"(?P<sep>\\?[\"']?\s*[:=,]?\s*\[?\s*\\?[\"']?\s*|\s+)"
    r"(?P<v>[^-\s\"'\\,}\[\]][^\s\"'\\,}\[\]]*)")


def scrub_secrets(text: str) -> str:
    """Free text with every URL's user info and the value of every secret-looking flag,
    key or variable (:func:`is_secret_name`) replaced by ``***``: an experiment file, a
    command line or a server log shown in a report or written with the results."""
    return _SECRET_VALUE.sub(_value, scrub_urls(text))
