#!/usr/bin/env bash
# Create .venv with Python 3.11 and install xlvin with the extras named in $1, comma-separated
# (`bash scripts/setup.sh test`; none: the core, what training and `xlvin quickstart` need).
# torch is installed first, at the version constraints.txt pins (its CPU wheel where pip finds
# one), then the package under the same constraints, so nothing that depends on torch pulls
# another build. Idempotent: re-installs only when pyproject.toml, constraints.txt or this
# script changed since the last successful set-up with these extras (one stamp per extras).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
case "$extras" in *[!a-z,]*) echo "setup.sh: extras are names joined by commas, got '$extras'" >&2; exit 2;; esac
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=".venv/.xlvin-setup${extras:+-${extras//,/-}}"
want=$(cat pyproject.toml constraints.txt scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -c constraints.txt torch
  .venv/bin/python -m pip install --quiet -c constraints.txt -e ".${extras:+[$extras]}"
  echo "$want" > "$stamp"
fi
