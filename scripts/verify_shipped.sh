#!/usr/bin/env bash
# Re-create every pre-trained file shipped with xlvin (src/xlvin/pretrain/data) in reproducible
# mode and compare its tensors' SHA-256 with the manifest's, printing the seconds each took;
# fails if any differs (XLVIN names another xlvin command than .venv/bin/xlvin).
set -euo pipefail
cd "$(dirname "$0")/.."
xlvin=${XLVIN:-.venv/bin/xlvin}
time "$xlvin" pretrain-executor --verify
time "$xlvin" pretrain-transe --verify
