"""Everything that touches a server or a clock: client, lanes, runs, probes, CLI."""

from replay._version import __version__
from replay.errors import ConfigError, TargetError, UserError

__all__ = ["ConfigError", "TargetError", "UserError", "__version__"]
