#!/usr/bin/env bash
# Create .venv with Python 3.11 and install xlvin (torch first, from its pinned CPU wheel).
# Idempotent: re-installs only when pyproject.toml or this script changed since the last
# successful set-up. Extras: test (the suite) and ray (`xlvin sweep`, tested by the suite).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.xlvin-setup
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet "torch==2.13.0"
  .venv/bin/python -m pip install --quiet -e ".[test,ray,atari]"
  echo "$want" > "$stamp"
fi
