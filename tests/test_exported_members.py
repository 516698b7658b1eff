"""Each package's __all__ is exactly its sorted public names (as httpx does)."""

import importlib

import pytest


@pytest.mark.parametrize("name", [
    "traces", "traces.importers", "traces.generate", "analysis", "analysis.schema",
    "analysis.read", "analysis.metrics", "analysis.fit", "analysis.judge", "analysis.report",
    "replay",
])
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    public = sorted(
        n for n in dir(module)
        if not n.startswith("_") and not isinstance(getattr(module, n), type(importlib))
    )
    exported = [n for n in module.__all__ if n != "__version__"]
    assert exported == sorted(exported)
    assert set(exported) == set(public)


def _loaded_after(imports: str, watched: tuple[str, ...]) -> list[str]:
    """Which of ``watched`` a fresh interpreter has in sys.modules after ``import
    imports`` (a subprocess: this one has loaded everything already)."""
    import subprocess
    import sys

    code = (f"import sys, {imports}; "
            f"print(','.join(m for m in {watched!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


@pytest.mark.cli
def test_pure_packages_do_not_import_network_or_cli() -> None:
    assert _loaded_after("traces, analysis", ("aiohttp", "replay", "rich")) == []


@pytest.mark.cli
def test_load_path_imports_no_report_machinery() -> None:
    """Every worker imports replay.load: the report wing (jinja2, matplotlib) stays out."""
    assert _loaded_after("replay.load", ("jinja2", "matplotlib", "analysis.report")) == []


@pytest.mark.cli
def test_building_the_cli_parser_imports_no_report_machinery() -> None:
    """Every command builds the whole parser (``compare`` declares its flags on
    CompareOptions): that must not load the report wing for ``run --help``."""
    assert _loaded_after("replay.cli; replay.cli.build_parser()",
                         ("jinja2", "matplotlib", "analysis.report")) == []
