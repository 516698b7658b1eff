"""How many examples a hypothesis property draws: fewer in CI.

The ``ci`` profile (tests/conftest.py) caps properties that keep hypothesis's
default; a property that names its own ``max_examples`` passes it through
``examples`` so the cap reaches it too. Locally every property draws its full count.
"""

from __future__ import annotations

import os

CI_MAX_EXAMPLES = 25


def in_ci() -> bool:
    """Whether this run is CI's (``CI=true``, as CI services set it)."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def examples(count: int) -> int:
    """``count``, or at most ``CI_MAX_EXAMPLES`` in CI."""
    return min(count, CI_MAX_EXAMPLES) if in_ci() else count
