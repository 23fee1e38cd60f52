#!/usr/bin/env bash
# The paper's maze XLVIN curricula (issue 16) on one lent GPU machine: `xlvin reproduce maze`
# (and, with EXPERIMENTS="maze contextual-maze", the contextual maze) for AGENTS x SEEDS cells,
# one process per cell, all on the GPU (DEVICE), each experiment stopping DEADLINE_MIN minutes
# after its launch wherever it got to. Every cell checkpoints, so a later call resumes it: pass the previous call's
# maze-runs.tgz as PRIOR (carried to the machine) and it is unpacked into RUNS first.
# Writes to $OUT: maze.log, results/ (maze.json/md and the figures of these cells, finished or
# still training) and maze-runs.tgz (run directories with checkpoints and per-level weights, no
# TensorBoard logs: what the next call and figure 5 need). Run from the repository root:
#   OUT=dir RUNS=/tmp/maze-runs AGENTS=xlvin SEEDS=3 DEADLINE_MIN=8 [PRIOR=maze-runs.tgz] \
#     bash scripts/maze_device.sh
# The wheels in .whl/ (gymnasium, farama-notifications) are installed to /tmp/site when the
# machine lacks gymnasium; XLVIN_CACHE=.xcache reuses executors pre-trained here.
set -u -o pipefail
: "${OUT:?}" "${RUNS:?}" "${AGENTS:=xlvin}" "${SEEDS:=3}" "${FIRST_SEED:=0}" "${DEADLINE_MIN:=8}"
: "${EXPERIMENTS:=maze}" "${BUDGET:=1000000}" "${PRIOR:=}" "${HARD_LIMIT_S:=570}" "${DEVICE:=cuda}"
: "${PYTHON:=python3}"
if ! "$PYTHON" -c "import gymnasium" 2>/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
    .whl/gymnasium-*.whl .whl/farama*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD/src XLVIN_CACHE=$PWD/.xcache PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
nvidia-smi -L 2>/dev/null; nproc; date +%T
mkdir -p "$RUNS"
if [ -n "$PRIOR" ]; then tar xzf "$PRIOR" -C "$RUNS" || exit 1; fi
cells=$(( $(tr ',' '\n' <<<"$AGENTS" | wc -l) * SEEDS ))
for experiment in $EXPERIMENTS; do
  timeout -k 10 "$HARD_LIMIT_S" "$PYTHON" -m xlvin.cli reproduce "$experiment" --agents "$AGENTS" \
    --seeds "$SEEDS" --first-seed "$FIRST_SEED" --budget "$BUDGET" --device "$DEVICE" \
    --jobs "$cells" --deadline-minutes "$DEADLINE_MIN" --runs "$RUNS" --results "$OUT/results" \
    >>"$OUT/maze.log" 2>&1
  echo "$experiment: exit $?"; date +%T
done
tr '\r' '\n' <"$OUT/maze.log" | tail -n 40
tar czf "$OUT/maze-runs.tgz" --exclude='tb' --exclude='.lock' -C "$RUNS" .
ls -la "$OUT"
