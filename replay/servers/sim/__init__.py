"""A simulated vLLM-compatible server whose truth is known (demo target and test double).

Three ways in: ``async with SimServer(SimConfig(...)) as srv`` (in-process; its
``truth`` list and ``engine`` are open to the test), ``with SimServerProcess(...)
as srv`` (a child process, always stopped), and ``agentreplay serve-sim``.

Endpoints as vLLM 0.32/0.33 shapes them: ``/v1/models``, ``/v1/completions``
(text or token ids), ``/v1/chat/completions``, streaming or not, ``/metrics``
(``vllm:`` names), ``/server_info?config_format=json`` (plus ``simulated``,
``sim_profile``, ``time_scale``), ``/health``, ``/version``, ``/tokenize``, ``/detokenize``,
``/reset_prefix_cache``. Every response carries ``X-Simulated: agentreplay``.

The performance model (``Engine`` over a ``PrefixCache``) is pure and clockless;
profiles (``list_profiles()``) hold the published step-time figures. Text is
tokenized by ``SimTokenizer`` (documented there); generated token ``N`` reads
``" t" + letters(N)`` (one word of letters that tokenizes back to ``N``). Faults
come from ``parse_faults("KIND=VALUE,...")``; the truth log
(``TruthRecord``) says what the server did for each request, the step log
(``StepTruth``, ``read_step_log``) what each engine step was modelled to take and
really took; ``/metrics`` adds their sums as ``vllm_sim:engine_step_*_seconds_total``
(the simulator's lateness). ``SimConfig.slowdown`` makes it late on purpose.

Modules: ``_config`` (settings, /server_info), ``_server`` (app, routes, truth),
``_intake`` (request validation), ``_steploop`` (the clock of engine steps),
``_respond`` (SSE and JSON bodies, faults), ``_engine``/``_cache``/``_profile`` (the
pure performance model), ``_decode`` (the published decode benchmark on that model:
``modelled_decode``), ``_bulk`` (``DecodeRun``: many pure-decode steps at once,
exactly as many ``step()`` calls; the twin's fast path).
"""

from replay.servers.sim._bulk import DecodeRun
from replay.servers.sim._cache import PrefixCache, block_hashes
from replay.servers.sim._config import SERVE_SIM_PROFILE, SimConfig, server_info, step_log_path
from replay.servers.sim._dcgm import DCGM_PATH, PowerMeter, modelled_energy_j
from replay.servers.sim._decode import DecodePoint, modelled_decode
from replay.servers.sim._engine import Engine, EngineCounters, SimRequest, StepResult
from replay.servers.sim._faults import FAULT_OUTCOMES, FaultKind, FaultSpec, parse_faults
from replay.servers.sim._process import SimServerProcess, free_port
from replay.servers.sim._profile import (
    MAX_GPU_BLOCKS,
    MAX_MODELLED_STEP_S,
    MAX_STEP_NOISE,
    MAX_STEP_S,
    Backend,
    BackendTiming,
    SimProfile,
    SpeculativeSpec,
    list_profiles,
    load_profile,
)
from replay.servers.sim._server import SimServer
from replay.servers.sim._steploop import StepLoop
from replay.servers.sim._tokenizer import SimTokenizer
from replay.servers.sim._truth import StepTruth, TruthRecord, read_step_log

__all__ = [
    "Backend",
    "BackendTiming",
    "DCGM_PATH",
    "DecodePoint",
    "DecodeRun",
    "Engine",
    "EngineCounters",
    "FAULT_OUTCOMES",
    "FaultKind",
    "FaultSpec",
    "MAX_GPU_BLOCKS",
    "MAX_MODELLED_STEP_S",
    "MAX_STEP_NOISE",
    "MAX_STEP_S",
    "PowerMeter",
    "PrefixCache",
    "SERVE_SIM_PROFILE",
    "SimConfig",
    "SimProfile",
    "SimRequest",
    "SimServer",
    "SimServerProcess",
    "SimTokenizer",
    "SpeculativeSpec",
    "StepLoop",
    "StepResult",
    "StepTruth",
    "TruthRecord",
    "block_hashes",
    "free_port",
    "list_profiles",
    "load_profile",
    "modelled_decode",
    "modelled_energy_j",
    "parse_faults",
    "read_step_log",
    "server_info",
    "step_log_path",
]
