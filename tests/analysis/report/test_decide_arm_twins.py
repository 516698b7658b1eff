"""A twin per arm (the demo's ``twin-plan.json``: ``twins``, each fitted on one arm's
runs): the decision puts each twin beside its own arm's measured bracket, labelled
modelled with its replica count, and says whether the two can both hold; the report's
twin section and chart show each arm's twin."""

from __future__ import annotations

import html as htmllib
from pathlib import Path

import orjson
import pytest

from analysis import compare_runs, parse_tier, read_extras, read_runs, report_bundle
from analysis.report import TWIN_PLAN_FILE, decide
from tests.analysis.report.builders import make_sweep

# make_sweep: 2 GPUs per run; at 60 tok/s/user auto meets 4 users and fails 16,
# latency_specialized meets every level (1, 4, 16)
TIER = parse_tier("60:2")


def _twin(arm: str, bracket: list[int | None], text: str) -> dict[str, object]:
    return {"arm": arm, "backend": arm, "replicas": 1, "gpus_per_replica": 2,
            "duration_s": 30.0, "prediction_interval": {"nominal": 0.9, "checked_users": 4},
            "levels": [{"users": u, "p90_interactivity": 200.0 / u} for u in (1, 4, 16)],
            "tiers": [{"tier": "60:2", "floor": 60.0, "bracket": bracket, "text": text,
                       "interval": "from 4 users to below 16 users"}]}


PLAN = {"twins": [_twin("auto", [8, 16], "between 8 and 16 users"),
                  # passes at most 4 where the arm measured 16 met: cannot both hold
                  _twin("latency_specialized", [4, 8], "between 4 and 8 users")]}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, list]:
    root = make_sweep(tmp_path_factory.mktemp("arm-twins"), per_user=40)
    runs = read_runs([root])
    return root, compare_runs(runs, tiers=[TIER]), runs


def test_each_arm_s_twin_stands_beside_its_own_bracket(sweep: tuple) -> None:
    _, c, _ = sweep
    line = decide(c, PLAN).lines()[0]
    auto = ("auto between 4 and 16 users measured (2.00 \u2013 8.00 users per GPU), "
            "its twin (1 replica) modelled between 8 and 16 users, prediction interval "
            "from 4 users to below 16 users, consistent with the measured bracket; ")
    assert auto in line
    lat = ("latency_specialized at least 16 users measured (\u2265 8.00 users per GPU), "
           "its twin (1 replica) modelled between 4 and 8 users, prediction interval from "
           "4 users to below 16 users, outside the measured bracket (the measurement holds); "
           "latency_specialized / auto")
    assert lat in line
    # the twins stand beside their arms, not after the tier (a one-twin plan's place)
    assert line.index(auto) < line.index(lat)
    assert line.count("its twin") == 2


def test_an_arm_without_a_twin_keeps_its_bracket_alone(sweep: tuple) -> None:
    _, c, _ = sweep
    line = decide(c, {"twins": PLAN["twins"][:1]}).lines()[0]
    assert line.count("its twin") == 1
    assert "latency_specialized at least 16 users measured (\u2265 8.00 users per GPU); " in line
    assert decide(c).lines()[0] == decide(c, {"twins": []}).lines()[0]


def test_report_shows_a_twin_section_and_line_per_arm(sweep: tuple, tmp_path: Path) -> None:
    root, c, runs = sweep
    (tmp_path / TWIN_PLAN_FILE).write_bytes(orjson.dumps(PLAN))
    extras = read_extras(tmp_path)
    section = extras["twin"]
    assert section["title"] == "Twin estimate per arm (modelled)"
    assert section["table"]["rows"] == [
        ["60:2", "auto", "between 8 and 16 users", "from 4 users to below 16 users"],
        ["60:2", "latency_specialized", "between 4 and 8 users",
         "from 4 users to below 16 users"]]
    page = htmllib.unescape(report_bundle(c, runs, extras=extras)["report.html"])
    assert "auto's twin (modelled)" in page and "latency_specialized's twin (modelled)" in page
    assert "Twin estimate per arm (modelled)" in page
