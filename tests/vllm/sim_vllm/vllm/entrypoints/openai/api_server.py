"""A stand-in for ``python -m vllm.entrypoints.openai.api_server`` that runs the simulator.

With ``tests/vllm/sim_vllm`` on ``PYTHONPATH``, ``compare --launch --vllm-python
<this python>`` starts simulated servers instead of vLLM: the launcher's whole
path (process group, /health, /server_info check, stop) runs in seconds, and the
runs have real traffic. The process execs ``agentreplay serve-sim`` (same pid,
same process group) with the decode backend taken from ``--additional-config``.
``AGENTREPLAY_FAKE_STARTUP_S`` delays the start (a server still loading).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--additional-config", default="{}")
    args, _unknown = parser.parse_known_args()
    backend = json.loads(args.additional_config).get("decode_backend", "auto")
    print(f"sim vllm: model {args.model} backend {backend}", flush=True)
    time.sleep(float(os.environ.get("AGENTREPLAY_FAKE_STARTUP_S", "0")))
    os.execv(sys.executable, [sys.executable, "-m", "replay.cli", "serve-sim", "--backend",
                              backend, "--host", args.host, "--port", str(args.port)])


if __name__ == "__main__":
    main()
