#!/usr/bin/env bash
# The continuous-action steps of run.sh (`run.sh --cnap PATH --continuous ...`, which builds the
# environment first and calls this with its settings; see run.sh and README.md here):
#
#   run_continuous.sh CNAP OUT VENV RESULTS "SEEDS" CPU_BUDGET JOBS ROLLOUTS TEST_EPISODES \
#                     TRANSE_EPISODES STEPS "ENVS" "AGENTS"
#
# C1. their executor pre-training at hidden size 50 (classic control) and 64 (MuJoCo), their
#     TransE pre-training for MountainCarContinuous (through continuous_main.py), each once, each
#     when a run first needs it (a lock keeps two jobs from doing the same one);
# C2. their runs, JOBS at a time, in this order: for each env of ENVS (mountaincar-continuous,
#     halfcheetah), each agent of AGENTS (ppo, xlvin) for every seed; a run that another call
#     of this script is running (its lock is held) is skipped;
# C3. our parser over the logs, into RESULTS/continuous.{md,json}.
# A run whose log is complete is skipped, so a second call resumes; a run cut short (its .part
# log) starts again. Each run stops after CPU_BUDGET seconds of CPU time in its main process.
# Jobs run at the priority this script was started with (start it with nice).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/harness.sh"
cnap=$1 out=$2 venv=$3 results=$4 seeds=$5 cpu_budget=$6 jobs=$7 rollouts=$8 test_episodes=$9
transe_episodes=${10} steps=${11} envs=${12} agents=${13}
py="$venv/bin/python"
logs="$out/logs"
mkdir -p "$logs" "$out/work/models/transe/trained_transe" "$out/work/runs"
# classic_control.py reads ../models/transe/trained_transe/ from its working folder work/runs/NAME
ln -sfn "$out/work/models" "$out/work/runs/models"

# pretrain NAME DIR CMD...: CMD in DIR once (NAME.done records its wall seconds), under a lock.
pretrain() {
  local name=$1 dir=$2; shift 2
  (
    flock 9
    [ -f "$logs/$name.done" ] && exit 0
    echo "$(date +%T) pre-training: $name"
    local start=$SECONDS
    (cd "$dir" && "$@" > "$logs/$name.txt" 2>&1) || { echo "failed: $name ($logs/$name.txt)" >&2; exit 1; }
    echo "$((SECONDS - start))" > "$logs/$name.done"
  ) 9> "$logs/$name.lock"
}

# C1. Their executor pre-training (their defaults: 500 Erdos-Renyi MDPs of 20 states and 8
#     actions, sum aggregation) at the hidden size each script loads: classic_control.py reads
#     erdos-renyi-gnnstep1-actFalse-lnTrue.pt (hidden 50), mujoco.py the same weights under a
#     name with -hidden64, which their pre-training never writes: copied to it here.
executor() {
  local hidden=$1 dir="$out/executor-h$1"
  local trained="$dir/cnap/models/executor/trained_executor"
  mkdir -p "$trained"
  pretrain "executor-h$hidden" "$dir" "$py" -m cnap.models.executor.train --hidden_dimension "$hidden"
  [ -f "$trained/erdos-renyi-gnnstep1-actFalse-lnTrue-hidden$hidden.pt" ] ||
    cp "$trained/erdos-renyi-gnnstep1-actFalse-lnTrue.pt" "$trained/erdos-renyi-gnnstep1-actFalse-lnTrue-hidden$hidden.pt"
}
# Their TransE pre-training for MountainCarContinuous at 10 bins on TRANSE_EPISODES random
# episodes (their default 1,000; 5 is the ~5,000 transitions ours pre-trains on), their 5
# epochs, with the one fix continuous_main.py describes (classic_control.py reads it through the
# link work/runs/models).
transe() {
  pretrain transe-mountaincar-continuous "$out/work/models/transe" \
    "$py" "$here/continuous_main.py" transe --env=mountaincar-continuous --action_bins=10 \
    --num_episodes="$transe_episodes"
}

# C2. One run. MountainCarContinuous: the command of their README (classic, 10 bins, XLVIN-R
#     with TransE and executor; --device=cuda left out), PPO without the last two of
#     --include_transe --include_executor; --num_rollouts ROLLOUTS rounds of 5 episodes (their
#     default 20), each followed by an evaluation of TEST_EPISODES (--num_test_episodes, theirs
#     100). HalfCheetah: their README's MuJoCo command (XLVIN, 11 bins, 11 neighbours drawn by
#     manual_gaussian, depth 1; --record_video and --device=cuda left out) with
#     --num_total_train_steps STEPS (theirs 1,000,000), PPO without --include_executor.
run_one() {
  local env=$1 agent=$2 seed=$3
  local name="$env-$agent-seed$seed"
  [ -f "$logs/$name.txt" ] && return 0
  (
    flock -n 8 || { echo "$(date +%T) $name: running in another call, skipped"; exit 0; }
    run_locked "$env" "$agent" "$seed"
  ) 8> "$logs/$name.lock"
}
run_locked() {
  local env=$1 agent=$2 seed=$3
  local name="$env-$agent-seed$seed"
  local log="$logs/$name.txt" dir="$out/work/runs/$name"
  [ -f "$log" ] && return 0
  local flags entry trained
  if [ "$env" = mountaincar-continuous ]; then
    entry=("$venv/bin/classic")
    flags=(--env=mountaincar-continuous --seed="$seed" --graph_type=erdos-renyi --gnn_steps=1
           --value_loss_coef=1 --lr=0.001 --action_bins=10 --num_rollouts="$rollouts"
           --num_test_episodes="$test_episodes")
    [ "$agent" = xlvin ] && { transe; executor 50; flags+=(--include_transe=True --include_executor=True); }
    trained="$out/executor-h50/cnap/models/executor/trained_executor"
  else
    entry=("$py" "$here/continuous_main.py" mujoco)
    flags=(--env=halfcheetah --seed="$seed" --use_gae=True --lr_decay=True --save_model=True
           --enable_time_limit=True --num_total_train_steps="$steps" --gnn_steps=1
           --num_neighbours=11 --cat_method=encoder_cat_executor --sample_method=manual_gaussian
           --save_dir=logs)
    [ "$agent" = xlvin ] && { executor 64; flags+=(--include_executor=True); }
    trained="$out/executor-h64/cnap/models/executor/trained_executor"
  fi
  flags+=(--log_dir="$out/monitor/$name")
  rm -rf "$dir"
  mkdir -p "$dir/cnap/models/executor"
  [ "$agent" = xlvin ] && ln -s "$trained" "$dir/cnap/models/executor/trained_executor"
  harness_start "$log" "env $env agent $agent seed $seed" "${flags[@]}"
  echo "$(date +%T) $name (at most $cpu_budget s of CPU)"
  # RLIMIT_CPU: SIGXCPU at the budget, SIGKILL a minute later
  local start=$SECONDS rc=0
  (cd "$dir" && /usr/bin/time -f "harness: cpu_s %U user %S system (with reaped children)" \
    prlimit --core=0 --cpu="$cpu_budget:$((cpu_budget + 60))" "${entry[@]}" "${flags[@]}") >> "$log.part" 2>&1 || rc=$?
  harness_end "$log" "$name" "$rc" "$start"
}
export -f run_one run_locked pretrain executor transe harness_start harness_end
export out logs py venv here rollouts test_episodes transe_episodes steps cpu_budget
rc=0
for env in $envs; do for agent in $agents; do for seed in $seeds; do
  echo "$env $agent $seed"
done; done; done | xargs -P "$jobs" -L 1 bash -c 'run_one "$0" "$1" "$2"' || rc=1

# C3. Our statistics over their logs.
ours_parser parse_continuous_logs "$logs" --results "$results"
exit "$rc"
