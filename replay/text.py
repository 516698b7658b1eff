"""Small wording helpers for what the command prints (one ``plural`` for the tool:
analysis.text's, which the report shares)."""

from __future__ import annotations

from analysis.text import plural

__all__ = ["plural"]
