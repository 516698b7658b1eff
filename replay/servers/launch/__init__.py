"""Starting and watching vLLM servers: specs, processes, health.

Other packages import these names from ``replay.servers.launch``, never its private modules.
"""

from replay.servers.launch._launcher import (
    API_SERVER_MODULE,
    DEFAULT_STARTUP_TIMEOUT_S,
    LaunchedArm,
    LaunchMode,
    VllmArmSpec,
    arm_log_path,
    build_command,
    build_env,
    check_server_info,
    fetch_server_info,
    format_command,
    group_members,
    launch_arm,
    launch_arms,
    plan_arms,
    resolve_vllm_launcher,
)
from replay.servers.launch._model_files import ModelFiles, read_model_files, vllm_version
from replay.servers.launch._pin import cpu_list, parse_cpus, pin_client, pin_group
from replay.servers.launch._prelaunch import LaunchFacts, check_workload_fits, launch_facts
from replay.servers.launch._secrets import redact_args, scrub_file, secret_values
from replay.servers.launch._settings import MAX_GPUS_PER_ARM, LaunchSettings
from replay.servers.launch._vllm_process import ServerProcess, log_tail, port_is_free
from replay.servers.launch._watch import HEALTH_FAILURES, ServerWatcher

__all__ = [
    "API_SERVER_MODULE",
    "DEFAULT_STARTUP_TIMEOUT_S",
    "HEALTH_FAILURES",
    "MAX_GPUS_PER_ARM",
    "LaunchFacts",
    "LaunchMode",
    "LaunchSettings",
    "LaunchedArm",
    "ModelFiles",
    "ServerProcess",
    "ServerWatcher",
    "VllmArmSpec",
    "arm_log_path",
    "build_command",
    "build_env",
    "check_server_info",
    "check_workload_fits",
    "cpu_list",
    "fetch_server_info",
    "format_command",
    "group_members",
    "launch_arm",
    "launch_arms",
    "launch_facts",
    "log_tail",
    "parse_cpus",
    "pin_client",
    "pin_group",
    "plan_arms",
    "port_is_free",
    "read_model_files",
    "redact_args",
    "resolve_vllm_launcher",
    "scrub_file",
    "secret_values",
    "vllm_version",
]
