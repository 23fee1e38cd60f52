#!/usr/bin/env bash
# Set up the core (no extras: what `xlvin quickstart` needs), then run the main job: `xlvin
# quickstart` (a few minutes on 2 CPU cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/xlvin quickstart "$@"
