"""Importers of public trace formats (WEKA/AgentX, Mooncake, Azure, TraceLab), sniffing."""

from traces.importers._azure import (
    import_azure,
)
from traces.importers._mooncake import (
    MOONCAKE_BLOCK_SIZE,
    import_mooncake,
)
from traces.importers._registry import (
    IMPORTERS,
)
from traces.importers._sniff import (
    sniff_trace_format,
)
from traces.importers._tracelab import (
    import_tracelab,
)
from traces.importers._weka import (
    import_weka,
)

__all__ = [
    "IMPORTERS",
    "MOONCAKE_BLOCK_SIZE",
    "import_azure",
    "import_mooncake",
    "import_tracelab",
    "import_weka",
    "sniff_trace_format",
]
