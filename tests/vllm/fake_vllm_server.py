"""A stand-in for vLLM's server process, to test the launcher's lifecycle fast.

Takes the launcher's arguments (``--model --host --port --additional-config``)
and answers ``/health`` and ``/server_info`` like vLLM in dev mode. ``--fake-*``
options make it misbehave: report another backend, die before health, ignore
SIGTERM, or start a helper child (like vLLM's engine core) in its group.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--additional-config", default="{}")
    parser.add_argument("--fake-report-backend", default=None)
    parser.add_argument("--fake-exit-early", action="store_true")
    parser.add_argument("--fake-ignore-sigterm", action="store_true")
    parser.add_argument("--fake-child", action="store_true")
    parser.add_argument("--fake-startup-s", type=float, default=0.2)
    args = parser.parse_args()

    print(f"fake vllm: model {args.model}", flush=True)
    if args.fake_exit_early:
        print("ValueError: no config.json in model directory", flush=True)
        sys.exit(3)
    if args.fake_ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.fake_child:
        # a helper in the same process group, as vLLM's engine core is
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    additional = json.loads(args.additional_config)
    if args.fake_report_backend is not None:
        additional["decode_backend"] = args.fake_report_backend
    info = {
        "vllm_config": {
            "additional_config": additional,
            "model_config": {
                "model": args.model,
                "served_model_name": args.served_model_name or args.model,
            },
        },
        "vllm_env": {"VLLM_SERVER_DEV_MODE": os.environ.get("VLLM_SERVER_DEV_MODE"),
                     "VLLM_CPU_OMP_THREADS_BIND": os.environ.get("VLLM_CPU_OMP_THREADS_BIND")},
        "system_env": {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")},
    }
    time.sleep(args.fake_startup_s)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path == "/health":
                body = b""
            elif self.path.startswith("/server_info"):
                body = json.dumps(info).encode()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *a: object) -> None:
            pass

    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
