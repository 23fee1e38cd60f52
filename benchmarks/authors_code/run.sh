#!/usr/bin/env bash
# The authors' own XLVIN code (dransyhe/CNAP), run beside ours: CartPole-v0 (Table 1) by
# default, their maze curriculum with --maze, their continuous-action runs with --continuous.
#
#   bash benchmarks/authors_code/run.sh --cnap PATH [--out DIR] [--results DIR] [--seeds "1 2 ... 10"] [--jobs N]
#   bash benchmarks/authors_code/run.sh --cnap PATH --maze [--out DIR] [--results DIR] [--seeds "1 2 3"]
#                                       [--cpu-budget SECONDS] [--venv DIR] [--nice N]
#   bash benchmarks/authors_code/run.sh --cnap PATH --continuous [--out DIR] [--results DIR] [--seeds "1 2 3"]
#                                       [--envs "mountaincar-continuous halfcheetah"] [--agents "ppo xlvin"]
#                                       [--rollouts 4]
#                                       [--test-episodes 10] [--transe-episodes 5] [--steps 49152]
#                                       [--cpu-budget SECONDS]
#                                       [--jobs N] [--venv DIR]
#
# PATH is a checkout of https://github.com/dransyhe/CNAP (commit e303fc5; see README.md here).
# CartPole, four steps, each skipped when its output is already complete, so a second call resumes:
#   1. an isolated virtual environment in DIR/venv (not ours: gym 0.19, numpy<2, SB3 1.3.0,
#      a current torch, the torch_scatter stand-in of this folder), their package editable;
#   2. their executor pre-training and their CartPole TransE pre-training, their settings;
#   3. their CartPole XLVIN-R and PPO for every seed, N at a time, one log per run;
#   4. our parser (run with this project's .venv) over those logs, into RESULTS/table1.{md,json}.
# DIR defaults to ~/xlvin-runs/authors-code, RESULTS to DIR/results: pass
# --results results/authors-code to update the committed table.
#
# --maze: the same environment (--venv, default ~/xlvin-runs/authors-code/venv, built if
# missing), then, in DIR (default ~/xlvin-runs/authors-code-maze):
#   M1. their executor pre-training at the maze's hidden size 10 (their maze.py loads
#       erdos-renyi-gnnstep1-actFalse-lnTrue-hidden10.pt, a name their pre-training never writes);
#   M2. their maze XLVIN (--include_executor=True) and PPO for every seed (default 1 2 3), one
#       run at a time at CPU priority N (--nice, default 19: the lowest, which starves behind
#       any busy job; 5 takes about one process's share beside three), each stopped after SECONDS of CPU time in its
#       main process (default 1200; their own limit, 1000 rollouts a level, is days of CPU);
#       a finished run (curriculum done, or stopped at its budget) is not run again;
#   M3. our parser over those logs, into RESULTS/maze.{md,json}.
#
# --continuous: the same environment plus gymnasium and mujoco (--venv as for --maze), then, in
# DIR (default ~/xlvin-runs/authors-code-continuous), run_continuous.sh: their executor and
# MountainCarContinuous TransE pre-training (--transe-episodes random episodes, theirs 1,000),
# their MountainCarContinuous (--rollouts rounds of 5
# episodes, their default 20; evaluations of --test-episodes episodes, theirs 100) and HalfCheetah (--steps env steps, theirs 1,000,000) PPO and XLVIN
# (--agents) for every seed (default 1 2 3), N at a time (--jobs, default 2), each stopped after
# SECONDS of CPU time in its main process (default 3600); our parser into
# RESULTS/continuous.{md,json}. Several calls may run side by side (say one per env or agent):
# a run another call is running is skipped.
# Nothing of their code enters this repository.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/harness.sh"
cnap="" out="" results="" seeds="" jobs=2 maze=0 continuous=0 venv="" cpu_budget="" nice=19
envs="mountaincar-continuous halfcheetah" agents="ppo xlvin" rollouts=4 test_episodes=10 transe_episodes=5 steps=49152
while [ $# -gt 0 ]; do
  case "$1" in
    --cnap) cnap=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --maze) maze=1; shift ;;
    --continuous) continuous=1; shift ;;
    --envs) envs=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    --rollouts) rollouts=$2; shift 2 ;;
    --test-episodes) test_episodes=$2; shift 2 ;;
    --transe-episodes) transe_episodes=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --venv) venv=$2; shift 2 ;;
    --cpu-budget) cpu_budget=$2; shift 2 ;;
    --nice) nice=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1 (expected --cnap, --out, --results, --seeds, --jobs, --maze, --continuous, --envs, --agents, --rollouts, --test-episodes, --transe-episodes, --steps, --venv, --cpu-budget, --nice)" >&2; exit 2 ;;
  esac
done
[ "$maze$continuous" != 11 ] || { echo "run.sh: --maze and --continuous are separate runs; give one" >&2; exit 2; }
if [ "$maze" = 1 ]; then
  out=${out:-$HOME/xlvin-runs/authors-code-maze}
  venv=${venv:-$HOME/xlvin-runs/authors-code/venv}
  seeds=${seeds:-"1 2 3"}
  cpu_budget=${cpu_budget:-1200}
elif [ "$continuous" = 1 ]; then
  out=${out:-$HOME/xlvin-runs/authors-code-continuous}
  venv=${venv:-$HOME/xlvin-runs/authors-code/venv}
  seeds=${seeds:-"1 2 3"}
  cpu_budget=${cpu_budget:-3600}
else
  out=${out:-$HOME/xlvin-runs/authors-code}
  venv=${venv:-$out/venv}
  seeds=${seeds:-"1 2 3 4 5 6 7 8 9 10"}
fi
results=${results:-$out/results}
[ -n "$cnap" ] || { echo "run.sh: --cnap PATH is required (a checkout of dransyhe/CNAP)" >&2; exit 2; }
cnap=$(cd "$cnap" 2>/dev/null && pwd) || { echo "run.sh: --cnap $cnap is not a folder" >&2; exit 2; }
[ -f "$cnap/cnap/training/classic_control.py" ] ||
  { echo "run.sh: $cnap is not a CNAP checkout (no cnap/training/classic_control.py)" >&2; exit 2; }
for s in $seeds; do
  # CNAP's set_seed(seed) and make_env seed nothing when the seed is 0.
  [[ "$s" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: seeds must be positive integers (CNAP seeds nothing for 0), got $s" >&2; exit 2; }
done
[[ "$nice" =~ ^([0-9]|1[0-9])$ ]] || { echo "run.sh: --nice must be 0 to 19, got $nice" >&2; exit 2; }
for e in $envs; do
  [[ "$e" =~ ^(mountaincar-continuous|halfcheetah)$ ]] || { echo "run.sh: --envs takes mountaincar-continuous and halfcheetah, got $e" >&2; exit 2; }
done
for a in $agents; do
  [[ "$a" =~ ^(ppo|xlvin)$ ]] || { echo "run.sh: --agents takes ppo and xlvin, got $a" >&2; exit 2; }
done
[[ "$rollouts" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --rollouts must be a positive integer, got $rollouts" >&2; exit 2; }
[[ "$test_episodes" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --test-episodes must be a positive integer, got $test_episodes" >&2; exit 2; }
[[ "$transe_episodes" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --transe-episodes must be a positive integer, got $transe_episodes" >&2; exit 2; }
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --steps must be a positive integer, got $steps" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --jobs must be a positive integer, got $jobs" >&2; exit 2; }
cpu_budget=${cpu_budget:-1200}
[[ "$cpu_budget" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --cpu-budget must be a positive number of seconds, got $cpu_budget" >&2; exit 2; }
[ -x "$ours_python" ] || { echo "run.sh: $repo/.venv is missing: the last step parses the logs with this project's .venv (bash scripts/setup.sh makes it)" >&2; exit 2; }
mkdir -p "$out/logs"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore

# 1. Their environment. Every pin is a compatibility fix for Python 3.11 (README.md lists them).
#    Rebuilt when this function or the torch_scatter stand-in changes.
setup_venv() {
  python3.11 -m venv "$venv"
  local pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
  "${pip[@]}" "torch==2.13.0" "numpy<2" "wheel<0.40"
  "${pip[@]}" "setuptools<66"                        # gym 0.19's setup.py needs the old setuptools
  "${pip[@]}" --no-build-isolation "gym==0.19.0"     # builds against that setuptools
  "${pip[@]}" --no-deps "stable_baselines3==1.3.0"   # its torch pin would pull an old CUDA torch
  "${pip[@]}" "pandas<2.2" "matplotlib<3.9" networkx scipy "cloudpickle>=2.2"  # gym pins <1.7: fails on 3.11
  "${pip[@]}" safetensors                            # fixtures.py's output only
  "${pip[@]}" scikit-learn                           # their value_predictability.py (maze_fixtures.py)
  "${pip[@]}" "$here/torch_scatter_standin"
  "${pip[@]}" --no-deps --no-build-isolation -e "$cnap"
}
stamp="$venv/.cnap-setup"
want=$({ declare -f setup_venv; cat "$here"/torch_scatter_standin/torch_scatter/__init__.py; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  setup_venv
  echo "$want" > "$stamp"
fi
py="$venv/bin/python"

# gymnasium and mujoco for their MuJoCo runs (continuous_main.py maps their HalfCheetah-v2 onto
# gymnasium's HalfCheetah-v5); numpy<2 keeps gym 0.19's NumPy.
if [ "$continuous" = 1 ]; then
  cstamp="$venv/.cnap-continuous"
  if [ ! -f "$cstamp" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "gymnasium[mujoco]==1.4.0" "mujoco==4.0.0" "numpy<2"
    touch "$cstamp"
  fi
  exec bash "$here/run_continuous.sh" "$cnap" "$out" "$venv" "$results" "$seeds" "$cpu_budget" "$jobs" "$rollouts" "$test_episodes" "$transe_episodes" "$steps" "$envs" "$agents"
fi
if [ "$maze" = 1 ]; then
  exec bash "$here/run_maze.sh" "$cnap" "$out" "$venv" "$results" "$seeds" "$cpu_budget" "$nice"
fi
mkdir -p "$out/models/transe/trained_transe" "$out/work/cnap/models/executor/trained_executor"

# 2. Pre-training, with their defaults. Paths are relative to the working folder in their code:
#    the TransE script writes trained_transe/ under its cwd, classic_control reads
#    ../models/transe/trained_transe/ and cnap/models/executor/trained_executor/ from its cwd.
executor="$out/work/cnap/models/executor/trained_executor/erdos-renyi-gnnstep1-actFalse-lnTrue.pt"
if [ ! -f "$out/logs/executor.done" ]; then
  echo "$(date +%T) executor pre-training (their defaults: 500 Erdos-Renyi MDPs, 20 states, 8 actions)"
  start=$SECONDS
  (cd "$out/work" && "$py" -m cnap.models.executor.train > "$out/logs/executor.txt" 2>&1)
  echo "$((SECONDS - start))" > "$out/logs/executor.done"
fi
transe="$out/models/transe/trained_transe/transe_cartpole.pt"
if [ ! -f "$out/logs/transe_cartpole.done" ]; then
  echo "$(date +%T) TransE pre-training (their defaults: 50,000 random CartPole-v0 episodes, 10 epochs)"
  start=$SECONDS
  (cd "$out/models/transe" && "$py" -m cnap.models.transe.train --env cartpole > "$out/logs/transe_cartpole.txt" 2>&1)
  echo "$((SECONDS - start))" > "$out/logs/transe_cartpole.done"
fi
[ -f "$executor" ] && [ -f "$transe" ] || { echo "run.sh: pre-training left no weights; see $out/logs" >&2; exit 1; }

# 3. Their CartPole runs. XLVIN-R: the README's flags; PPO: the same command without the
#    executor and the TransE weights (their classic_control names that run "ppo").
run_one() {
  local agent=$1 seed=$2 log="$out/logs/cartpole-$1-seed$2.txt"
  grep -q "Largest average reward" "$log" 2>/dev/null && return 0
  local flags=(--env=cartpole --seed="$seed" --graph_type=erdos-renyi --gnn_steps=1 --lr=0.001
               --log_dir="$out/monitor/$agent-seed$seed")
  [ "$agent" = xlvin-r ] && flags+=(--include_transe=True --include_executor=True)
  local start=$SECONDS
  (cd "$out/work" && "$venv/bin/classic" "${flags[@]}" > "$log.part" 2>&1) || { echo "failed: $agent seed $seed ($log.part)" >&2; return 1; }
  echo "wall_s $((SECONDS - start))" >> "$log.part"
  mv "$log.part" "$log"
  echo "$(date +%T) done: $agent seed $seed"
}
export -f run_one
export out venv
for seed in $seeds; do for agent in xlvin-r ppo; do echo "$agent $seed"; done; done |
  xargs -P "$jobs" -L 1 bash -c 'run_one "$0" "$1"'

# 4. Our statistics over their logs.
ours_parser parse_logs "$out/logs" --results "$results"
