#!/usr/bin/env bash
# `xlvin reproduce executor-ablation` on a lent many-core machine, in blocks of BLOCK seeds
# (every arm of a block's seeds before the next block: a call cut at its limit leaves whole
# seeds), JOBS cells at a time, each block of SEED_STARTS in turn until HARD_LIMIT_S.
# Writes to $OUT: ablation.log and runs.tgz (the run directories without TensorBoard logs and
# checkpoints: what `xlvin reproduce executor-ablation --finished-only` reads). The shared
# pre-trained files come from XLVIN_CACHE=.xcache (carried), so no cell pre-trains there; the
# cells run in reproducible mode, the mode those files were made in (it names them).
# Run from the repository root:
#   OUT=dir SEED_STARTS="0 5 100 105 200 205" BLOCK=5 INITS=orthogonal bash scripts/executor_ablation_device.sh
set -u -o pipefail
: "${OUT:?}" "${SEED_STARTS:?}" "${BLOCK:=5}" "${INITS:=orthogonal}" "${JOBS:=15}"
: "${PROTOCOLS:=paper}" "${ENVS:=CartPole-v0}" "${HARD_LIMIT_S:=540}" "${RUNS:=/tmp/ablation-runs}"
: "${PYTHON:=python3}"
if ! "$PYTHON" -c "import gymnasium" 2>/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
    .whl/gymnasium-*.whl .whl/farama*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD/src XLVIN_CACHE=$PWD/.xcache PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
nproc; "$PYTHON" -c "import torch; print('torch', torch.__version__)"; date +%T
end=$(( $(date +%s) + HARD_LIMIT_S ))
for first in $SEED_STARTS; do
  left=$(( end - $(date +%s) ))
  [ "$left" -gt 30 ] || break
  timeout -k 5 "$left" env $("$PYTHON" -m xlvin.kernels) "$PYTHON" -m xlvin.cli reproduce executor-ablation --protocols "$PROTOCOLS" \
    --envs "$ENVS" --inits "$INITS" --seeds "$BLOCK" --first-seed "$first" --jobs "$JOBS" \
    --runs "$RUNS" --results /tmp/ablation-results >>"$OUT/ablation.log" 2>&1
  echo "seeds $first-$(( first + BLOCK - 1 )): exit $?"; date +%T
done
tar czf "$OUT/runs.tgz" --exclude='tb' --exclude='checkpoint*' --exclude='.lock' -C "$RUNS" .
ls -la "$OUT"
