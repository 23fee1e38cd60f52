#!/usr/bin/env bash
# The maze steps of run.sh (`run.sh --cnap PATH --maze ...`, which builds the environment first
# and calls this with its settings; see run.sh and README.md here):
#
#   run_maze.sh CNAP OUT VENV RESULTS "SEEDS" CPU_BUDGET NICE
#
# M1. their executor pre-training at the maze's sizes, M2. their maze PPO and XLVIN for every
# seed, one run at a time (seed 1 PPO, seed 1 XLVIN, seed 2 PPO, ...), M3. our parser over the
# logs. Every job of theirs runs at CPU priority NICE (19: the lowest): `nice -n NICE` inside a
# session of its own whose autogroup is niced to NICE too. With
# the kernel's autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled = 1) `nice` only
# ranks processes within one session, so `nice` alone still takes an equal share from jobs
# started in another session.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/harness.sh"
cnap=$1 out=$2 venv=$3 results=$4 seeds=$5 cpu_budget=$6 nice=${7:-19}
py="$venv/bin/python"
logs="$out/logs"
mkdir -p "$logs" "$out/work/cnap/environment/maze" "$out/work/cnap/models/executor/trained_executor"
ln -sfn "$cnap/cnap/environment/maze/dataset" "$out/work/cnap/environment/maze/dataset"

job="" current_log=""
# stopped by hand: end the running job and say so in its log (the next call starts it again)
trap '[ -n "$job" ] && kill -- -"$job" 2>/dev/null
      [ -n "$current_log" ] && echo "harness: stopped $(date -u +%FT%TZ)" >> "$current_log"
      exit 130' INT TERM
trap '[ -n "$job" ] && kill -- -"$job" 2>/dev/null || true' EXIT

# niced DIR CMD...: run CMD in DIR, in a new session (its own autogroup, niced to NICE) at nice
# NICE, without core dumps; $job holds its process group while it runs; returns its exit status.
niced() {
  setsid bash -c 'n=$1; cd "$2" || exit 1; shift 2; { echo "$n" > /proc/self/autogroup; } 2>/dev/null; exec nice -n "$n" prlimit --core=0 "$@"' \
    niced "$nice" "$@" &
  job=$!
  local rc=0
  wait "$job" || rc=$?
  job=""
  return "$rc"
}

# M1. Their executor pre-training (their defaults: 500 Erdos-Renyi MDPs of 20 states and 8
#     actions, sum aggregation) at hidden size 10, the maze's --gnn_hidden_dim. It writes
#     erdos-renyi-gnnstep1-actFalse-lnTrue.pt under its working folder; their maze.py reads the
#     same weights under a name with -hidden10. Run before the first XLVIN run (PPO needs none).
trained="$out/work/cnap/models/executor/trained_executor"
pretrain_executor() {
  [ -f "$logs/executor.done" ] && return 0
  echo "$(date +%T) maze executor pre-training (their defaults, --hidden_dimension 10)"
  local start=$SECONDS
  niced "$out/work" "$py" -m cnap.models.executor.train --hidden_dimension 10 > "$logs/executor.txt" 2>&1
  cp "$trained/erdos-renyi-gnnstep1-actFalse-lnTrue.pt" "$trained/erdos-renyi-gnnstep1-actFalse-lnTrue-hidden10.pt"
  echo "$((SECONDS - start))" > "$logs/executor.done"
}

# M2. Their maze runs, through maze_main.py (their entry point plus what it lacks: the module
#     global their evaluation reads, seeding, closing finished vector envs). XLVIN: their
#     --include_executor=True with every other setting theirs (depth 1, Erdos-Renyi executor,
#     15 envs x 2048 steps a rollout, a level passed at > 95 % of 100 stochastic episodes);
#     PPO: the same without the executor. --save_model=True because their held-out evaluation
#     runs only when a passed level is saved (to maze/ under the run's folder).
run_one() {
  local agent=$1 seed=$2
  local log="$logs/maze-$agent-seed$seed.txt" dir="$out/runs/$agent-seed$seed"
  [ -f "$log" ] && return 0
  [ "$agent" = xlvin ] && pretrain_executor
  rm -rf "$dir"
  mkdir -p "$dir/cnap/environment/maze" "$dir/cnap/models/executor" "$dir/maze"
  ln -s "$cnap/cnap/environment/maze/dataset" "$dir/cnap/environment/maze/dataset"
  ln -s "$trained" "$dir/cnap/models/executor/trained_executor"
  local flags=(--env=maze --seed="$seed" --save_model=True)
  [ "$agent" = xlvin ] && flags+=(--include_executor=True)
  harness_start "$log" "agent $agent seed $seed" "${flags[@]}"
  current_log="$log.part"
  echo "$(date +%T) maze $agent seed $seed (at most $cpu_budget s of CPU)"
  # RLIMIT_CPU: SIGXCPU at the budget, SIGKILL a minute later (a hard limit equal to the soft
  # one would kill with SIGKILL at once, which cannot be told from other kills)
  local start=$SECONDS rc=0
  niced "$dir" /usr/bin/time -f "harness: cpu_s %U user %S system (with reaped children)" \
    prlimit --cpu="$cpu_budget:$((cpu_budget + 60))" "$py" "$here/maze_main.py" "${flags[@]}" >> "$log.part" 2>&1 || rc=$?
  current_log=""
  harness_end "$log" "maze $agent seed $seed" "$rc" "$start"
}
for seed in $seeds; do
  for agent in ppo xlvin; do
    run_one "$agent" "$seed"
  done
done

# M3. Our statistics over their logs.
ours_parser parse_maze_logs "$logs" --results "$results" --cpu-budget "$cpu_budget"
