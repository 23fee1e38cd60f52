#!/usr/bin/env bash
# Set everything up, then run the test suite (under 15 minutes on 2 CPU cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -n 2 "$@"
