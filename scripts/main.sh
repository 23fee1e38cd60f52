#!/usr/bin/env bash
# Set everything up, then run the main job: `xlvin quickstart` (a few minutes on 2 CPU cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/xlvin quickstart "$@"
