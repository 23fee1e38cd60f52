#!/usr/bin/env bash
# The paper's Atari cells (figures 4 and 6) on one lent GPU machine, each cell its own process:
# by default Freeway x {ppo, xlvin-r, xlvin-cp, atreec} for FREEWAY transitions, Alien and
# Enduro x {ppo, xlvin-r, atreec} for OTHERS transitions, seeds FIRST_SEED .. FIRST_SEED +
# SEEDS - 1 (default one seed); CELLS="Freeway:ppo,xlvin-r Alien:ppo" picks other games and
# agents. Training stops DEADLINE_MIN minutes after launch wherever it got to (checkpointed:
# `xlvin reproduce atari` resumes it), then each cell evaluates its greedy policy on 10 fresh
# games. A failing cell leaves the others running. Writes to $OUT: log-<cell>.txt files merged
# into cells.log, and runs.tgz (metrics, configs, summaries, final evaluations; no weights).
# Usage:
#   OUT=dir RUNS=dir DEVICE=cuda FREEWAY=200000 OTHERS=100000 DEADLINE_MIN=6.5 bash atari_device.sh
#   OUT=dir RUNS=dir CELLS="Freeway:ppo,xlvin-r" SEEDS=4 FREEWAY=100000 bash atari_device.sh
set -u -o pipefail
: "${OUT:?}" "${RUNS:?}" "${DEVICE:=cuda}" "${FREEWAY:=200000}" "${OTHERS:=100000}"
: "${DEADLINE_MIN:=6.5}" "${EVAL_GAMES:=10}" "${HARD_LIMIT_S:=560}" "${SEEDS:=1}" "${FIRST_SEED:=0}"
: "${CELLS:=Freeway:ppo,xlvin-r,xlvin-cp,atreec Alien:ppo,xlvin-r,atreec Enduro:ppo,xlvin-r,atreec}"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
python3 - <<'PY' || exit 1
import sys, torch, numpy, gymnasium, ale_py, cv2
print("python", sys.version.split()[0], "torch", torch.__version__, "numpy", numpy.__version__,
      "gymnasium", gymnasium.__version__, "ale_py", ale_py.__version__, "cv2", cv2.__version__)
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")
PY
nproc
cells=()
for group in $CELLS; do
  game=${group%%:*}
  budget=$OTHERS; [ "$game" = Freeway ] && budget=$FREEWAY
  for agent in $(tr ',' ' ' <<<"${group#*:}"); do
    for seed in $(seq "$FIRST_SEED" $((FIRST_SEED + SEEDS - 1))); do
      cells+=("$game $agent $budget $seed")
    done
  done
done
pids=()
for cell in "${cells[@]}"; do
  read -r game agent budget seed <<<"$cell"
  timeout -k 10 "$HARD_LIMIT_S" python3 -m xlvin.cli reproduce atari --games "$game" \
    --agents "$agent" --seeds 1 --first-seed "$seed" --transitions "$budget" --device "$DEVICE" --jobs 1 \
    --deadline-minutes "$DEADLINE_MIN" --eval-games "$EVAL_GAMES" --runs "$RUNS" \
    --results "$RUNS/results-$game-$agent-$seed" >"$OUT/log-$game-$agent-$seed.txt" 2>&1 &
  pids+=($!)
done
(while sleep 60 >/dev/null 2>&1; do  # progress: PPO updates logged per cell
  for d in "$RUNS"/t*/*/*/seed*; do printf '%s %s; ' "${d#"$RUNS"/}" "$(cat "$d/metrics.jsonl" 2>/dev/null | wc -l)"; done
  echo
done) &
monitor=$!
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
kill "$monitor"
echo "cells done: ${#pids[@]} launched, $failed failed"
for f in "$OUT"/log-*.txt; do echo "== $f"; tr '\r' '\n' <"$f" | tail -n 12; done >"$OUT/cells.log"
rm -f "$OUT"/log-*.txt
tar czf "$OUT/runs.tgz" --exclude='*.safetensors' --exclude='tb' --exclude='.lock' -C "$RUNS" .
ls -la "$OUT"
