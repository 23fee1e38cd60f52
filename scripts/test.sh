#!/usr/bin/env bash
# Set up the package with the `test` extra (pytest and everything the suite imports: plots, ray,
# atari, minigrid), then run the test suite (under 15 minutes on 2 CPU cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
exec .venv/bin/python -m pytest -n 2 "$@"
