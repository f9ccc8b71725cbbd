#!/usr/bin/env bash
# Installs everything cachebench needs to build and test, from Debian packages (and
# PyPI for the Python tooling that regenerates test fixtures). Idempotent, no prompts.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake pkg-config git
  libcli11-dev nlohmann-json3-dev libsentencepiece-dev libgtest-dev libgmock-dev
  libopenblas-dev zlib1g-dev libxxhash-dev liburing-dev
  python3 python3-pip gnuplot-nox ccache
)
PIP_PACKAGES=(numpy gguf unicodedata2)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: Debian packages already installed"
fi

PY=python3
if ! "$PY" -c "import numpy, gguf, unicodedata2" 2>/dev/null; then
  echo "setup: installing Python tooling: ${PIP_PACKAGES[*]}"
  # Debian's system Python refuses global installs (PEP 668); pyenv/venv Pythons do not.
  "$PY" -m pip install -q "${PIP_PACKAGES[@]}" 2>/dev/null ||
    "$PY" -m pip install -q --break-system-packages "${PIP_PACKAGES[@]}"
else
  echo "setup: Python tooling already installed"
fi

if command -v nvcc >/dev/null 2>&1; then
  echo "setup: CUDA toolkit found ($(nvcc --version | tail -1)); the CUDA backend will be built"
else
  echo "setup: no nvcc on PATH; the CUDA backend will be skipped (CPU backend only)"
fi
echo "setup: done"
