"""Small wording helpers for what the command prints (one ``plural`` for the tool:
the report's, which the terminal shares)."""

from __future__ import annotations

from analysis.report import plural

__all__ = ["plural"]
