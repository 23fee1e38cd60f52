# What run.sh, run_maze.sh and run_continuous.sh share (each sources it). The harness's lines
# it writes into a run's log are the ones harness_log.py reads.

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ours_python="$repo/.venv/bin/python"  # this project's .venv: run.sh checks it before any run

# ours_parser MODULE ARGS...: our parser benchmarks/authors_code/MODULE.py over their logs, with
# this project's .venv (bash scripts/test.sh sets it up), as a module of this checkout (-P: never
# one of the working folder).
ours_parser() {
  PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" \
    "$ours_python" -P -m "benchmarks.authors_code.$1" "${@:2}"
}

# harness_start LOG TITLE FLAGS...: a new LOG.part opened by the harness's lines: TITLE (the run),
# the flags of their command, the CPU budget ($cpu_budget) and the start time.
harness_start() {
  local log=$1 title=$2
  shift 2
  {
    echo "harness: $title"
    echo "harness: flags $*"
    echo "harness: cpu_budget_s $cpu_budget (main process, RLIMIT_CPU)"
    echo "harness: started $(date -u +%FT%TZ)"
  } > "$log.part"
}

# harness_end LOG NAME RC START: closes LOG.part with the run's exit status RC and its wall time
# since START ($SECONDS then), and keeps it as LOG when the run ended (0: their code finished;
# SIGXCPU, 152 or time's report of signal 24: the CPU budget); otherwise leaves LOG.part and
# returns 1. NAME names the run in the messages.
harness_end() {
  local log=$1 name=$2 rc=$3 start=$4
  { echo "harness: exit $rc"; echo "wall_s $((SECONDS - start))"; } >> "$log.part"
  if [ "$rc" = 0 ] || grep -q "Command terminated by signal 24" "$log.part" || [ "$rc" = 152 ]; then
    mv "$log.part" "$log"
    echo "$(date +%T) done: $name (exit $rc)"
  else
    echo "failed: $name (exit $rc; $log.part)" >&2
    return 1
  fi
}
