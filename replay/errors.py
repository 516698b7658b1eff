"""Errors of the replay side.

    UserError                   something the user can fix; CLI exit code 2
    ├── TargetError             server unreachable, wrong model, prompt too long
    └── ConfigError             bad option or option combination
    Stopped                     a stop (Ctrl-C, SIGTERM) came before the load started

Request failures are never exceptions: they become RequestRecord data
(status + error_kind). ``translate_errors`` in the client maps aiohttp and
asyncio exceptions to error kinds in one place.
"""

from __future__ import annotations

__all__ = ["ConfigError", "Stopped", "TargetError", "UserError"]


class UserError(Exception):
    """An error the user can fix; printed as one line, exit code 2."""


class TargetError(UserError):
    """The target server cannot be used as asked."""


class ConfigError(UserError):
    """An invalid option or combination of options."""


class Stopped(Exception):
    """A stop asked for while the run was still preparing (probing the server, building
    chat prompts): nothing was sent to measure, so there is no run to keep."""
