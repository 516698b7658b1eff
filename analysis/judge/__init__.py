"""Judgements over runs: fairness of arms, validity, evidence rules, comparison, verdicts,
capacity.
"""

from analysis.judge._analyse import (
    analyse_run,
    with_caveats,
)
from analysis.judge._bracket import (
    Bracket,
    RatioBracket,
    bracket_of,
    ratio_bracket,
)
from analysis.judge._capacity import (
    CapacityRow,
    capacity_table,
    meets_tier,
)
from analysis.judge._comparison import (
    HEADLINE,
    Comparison,
    Level,
    Ratio,
    compare_runs,
)
from analysis.judge._drift import (
    Drift,
    RepeatValue,
    drift_flip,
)
from analysis.judge._fairness import (
    ALLOWED_FIELDS,
    ConfigDiff,
    FairnessVerdict,
    diff_configs,
    flatten_config,
    gpu_count_of,
    judge_fairness,
    replica_diffs,
)
from analysis.judge._rules import (
    DEFAULT_RULES,
    Rules,
)
from analysis.judge._scenario import (
    ALIAS_NOTE as SCENARIO_ALIAS_NOTE,
)
from analysis.judge._scenario import (
    ALIASES as SCENARIO_ALIASES,
)
from analysis.judge._scenario import (
    SCENARIOS,
    ScenarioRules,
    ScenarioVerdict,
    judge_run_scenario,
    judge_scenario,
    setting_notes,
    stamp_scenario,
    workload_notes,
)
from analysis.judge._validity import (
    assess_comparison,
    assess_run,
    merge_validity,
    mismatch_share,
)
from analysis.judge._verdict import (
    NO_EVIDENCE_SPAN,
    noise_floor_text,
    ratio_interval_text,
    verdict_sentence,
)

__all__ = [
    "ALLOWED_FIELDS",
    "Bracket",
    "CapacityRow",
    "Comparison",
    "ConfigDiff",
    "DEFAULT_RULES",
    "Drift",
    "FairnessVerdict",
    "HEADLINE",
    "Level",
    "NO_EVIDENCE_SPAN",
    "Ratio",
    "RatioBracket",
    "RepeatValue",
    "Rules",
    "SCENARIOS",
    "SCENARIO_ALIASES",
    "SCENARIO_ALIAS_NOTE",
    "ScenarioRules",
    "ScenarioVerdict",
    "analyse_run",
    "assess_comparison",
    "assess_run",
    "bracket_of",
    "capacity_table",
    "compare_runs",
    "diff_configs",
    "drift_flip",
    "flatten_config",
    "gpu_count_of",
    "judge_fairness",
    "judge_run_scenario",
    "judge_scenario",
    "meets_tier",
    "merge_validity",
    "mismatch_share",
    "noise_floor_text",
    "ratio_bracket",
    "ratio_interval_text",
    "replica_diffs",
    "setting_notes",
    "stamp_scenario",
    "verdict_sentence",
    "with_caveats",
    "workload_notes",
]
