"""The synthetic generator: profiles calibrated to public traces, session chains, decode."""

from traces.generate._decode import (
    DECODE,
)
from traces.generate._generate import (
    DEFAULT_MAX_CONTEXT,
    REFERENCE_CONTEXT,
    generate,
    generate_trace,
    token_scale_for,
)
from traces.generate._profiles import (
    PROFILES,
    AgentType,
    LogNormal,
    Profile,
    Quantiles,
)

__all__ = [
    "AgentType",
    "DECODE",
    "DEFAULT_MAX_CONTEXT",
    "LogNormal",
    "PROFILES",
    "Profile",
    "Quantiles",
    "REFERENCE_CONTEXT",
    "generate",
    "generate_trace",
    "token_scale_for",
]
