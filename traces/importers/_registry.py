"""The importers by format name, as the CLI offers them."""

from __future__ import annotations

from collections.abc import Callable

from traces._import_common import ImportedTrace
from traces.importers._azure import import_azure
from traces.importers._mooncake import import_mooncake
from traces.importers._tracelab import import_tracelab
from traces.importers._weka import import_weka

__all__ = ["IMPORTERS"]

IMPORTERS: dict[str, Callable[..., ImportedTrace]] = {
    "azure": import_azure,
    "mooncake": import_mooncake,
    "tracelab": import_tracelab,
    "weka": import_weka,
}
"""Each takes ``(path, *, max_context: int | None = None, token_scale: float = 1.0)``;
the session formats (tracelab, weka) also ``dedupe: bool = False``."""

