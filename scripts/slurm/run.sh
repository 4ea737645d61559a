#!/usr/bin/env bash
# Run the toolkit sharded on Slurm (issue 18):  scripts/slurm/run.sh CONFIG N
#
# Submits shards.sbatch as a job array of N tasks (shard i/N for i in 0..N-1: ingest then
# audit of that shard), then merge.sbatch (ingest merge, audit merge, replay) to start only
# after every task succeeded (--dependency=afterok), and waits for both. The jobs run in the
# config's directory, with this shell's environment (PATH included) plus CONFIG=<absolute
# config path> and SHARDS=N. Job output goes to $SLURM_LOG_DIR (default ./slurm-logs in the
# config's directory): shard-<array id>_<task>.out and merge-<job id>.out.
#
# Exits 0 only when every array task and the merge completed with exit code 0. When a shard
# fails, the merge can never start: run.sh cancels it and the shards still queued or running,
# and exits 1 at once. Ctrl-C (or TERM) cancels both jobs. Other sbatch options (partition,
# account, time limit, ...) come from sbatch's own input variables: SBATCH_PARTITION,
# SBATCH_ACCOUNT, SBATCH_TIMELIMIT, ... RUN_MAX_PARALLEL=K runs at most K shards at once
# (--array=0-(N-1)%K). RUN_POLL sets the seconds between polls (default 5).
set -euo pipefail

prog=run.sh
die() { echo "$prog: error: $*" >&2; exit 1; }
note() { echo "$prog: $*" >&2; }

[ $# -eq 2 ] || { echo "usage: $prog CONFIG N" >&2; exit 2; }
config_arg=$1
shards=$2
case "$shards" in '' | *[!0-9]*) die "N must be a positive integer, not '$shards'" ;; esac
[ "$shards" -ge 1 ] || die "N must be at least 1"
[ -f "$config_arg" ] || die "config $config_arg not found"
for c in sbatch scontrol scancel; do
  command -v "$c" >/dev/null 2>&1 || die "$c is not on PATH (is this a Slurm submit host?)"
done
poll=${RUN_POLL:-5}
array_spec="0-$((shards - 1))"
if [ -n "${RUN_MAX_PARALLEL:-}" ]; then
  case "$RUN_MAX_PARALLEL" in *[!0-9]* | 0) die "RUN_MAX_PARALLEL must be a positive integer, not '$RUN_MAX_PARALLEL'" ;; esac
  array_spec="$array_spec%$RUN_MAX_PARALLEL"
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
config_dir=$(cd "$(dirname "$config_arg")" && pwd -P)
config=$config_dir/$(basename "$config_arg")
cd "$config_dir"
log_dir=${SLURM_LOG_DIR:-./slurm-logs}
mkdir -p "$log_dir" || die "cannot create log directory $log_dir"
log_dir=$(cd "$log_dir" && pwd -P)

export CONFIG=$config SHARDS=$shards

array_id=""
merge_id=""
cancel_all() {
  local ids=()
  [ -n "$merge_id" ] && ids+=("$merge_id")
  [ -n "$array_id" ] && ids+=("$array_id")
  [ ${#ids[@]} -eq 0 ] || scancel "${ids[@]}" 2>/dev/null || true
}
# shellcheck disable=SC2317  # called by the trap below
on_signal() {
  trap - INT TERM
  note "interrupted: cancelling jobs ${array_id:-} ${merge_id:-}"
  cancel_all
  exit 130
}
trap on_signal INT TERM

out=$(sbatch --parsable --array="$array_spec" --export=ALL --chdir="$config_dir" \
  --output="$log_dir/shard-%A_%a.out" "$here/shards.sbatch") ||
  die "sbatch of the shard array failed"
array_id=${out%%;*}
out=$(sbatch --parsable --dependency="afterok:$array_id" --kill-on-invalid-dep=yes \
  --export=ALL --chdir="$config_dir" --output="$log_dir/merge-%j.out" "$here/merge.sbatch") ||
  { cancel_all; die "sbatch of the merge failed (shard array $array_id cancelled)"; }
merge_id=${out%%;*}
note "submitted shard array $array_id ($shards tasks) and merge $merge_id (afterok:$array_id); logs in $log_dir"

field() { # field NAME RECORD: the value of NAME= in one `scontrol show job -o` record
  local v
  v=$(grep -o " $1=[^ ]*" <<<" $2" | head -n 1) || true
  echo "${v#* "$1"=}"
}
terminal() {
  case "$1" in
    COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | PREEMPTED | BOOT_FAIL | DEADLINE | OUT_OF_MEMORY) return 0 ;;
    *) return 1 ;;
  esac
}
# show JOBID: its records, one a line; retried, since a busy slurmctld may time out.
show() {
  local out
  for _ in 1 2 3 4 5; do
    if out=$(scontrol show job -o "$1" 2>&1); then
      echo "$out"
      return 0
    fi
    sleep 2
  done
  die "scontrol show job $1 failed: $out (finished jobs are forgotten after slurm.conf's MinJobAge)"
}

declare -A task_state task_exit
failed=""
last_progress=""
merge_state="" merge_exit="" merge_reason=""
while :; do
  task_state=() task_exit=()
  recs=$(show "$array_id") || exit 1
  while IFS= read -r rec; do
    [ -n "$rec" ] || continue
    tid=$(field ArrayTaskId "$rec")
    case "$tid" in '' | *[!0-9]*) continue ;; esac # the still-pending rest of the array
    task_state[$tid]=$(field JobState "$rec")
    task_exit[$tid]=$(field ExitCode "$rec")
  done <<<"$recs"
  rec=$(show "$merge_id") || exit 1
  merge_state=$(field JobState "$rec")
  merge_exit=$(field ExitCode "$rec")
  merge_reason=$(field Reason "$rec")

  done_n=0 run_n=0
  for tid in "${!task_state[@]}"; do
    st=${task_state[$tid]}
    if terminal "$st"; then
      done_n=$((done_n + 1))
      if [ "$st" != COMPLETED ] || [ "${task_exit[$tid]}" != 0:0 ]; then
        [ -n "$failed" ] || failed="shard $tid/$shards (job ${array_id}_$tid): $st, exit code ${task_exit[$tid]}"
      fi
    elif [ "$st" = RUNNING ] || [ "$st" = COMPLETING ]; then
      run_n=$((run_n + 1))
    fi
  done
  progress="shards: $done_n of $shards finished, $run_n running; merge: $merge_state"
  if [ "$progress" != "$last_progress" ]; then
    note "$progress"
    last_progress=$progress
  fi

  if [ -n "$failed" ] || [ "$merge_reason" = DependencyNeverSatisfied ]; then
    note "failed: ${failed:-merge $merge_id can never start ($merge_reason)}; cancelling the merge and the remaining shards"
    cancel_all
    # Wait until nothing of ours is queued or running any more.
    for _ in $(seq 1 60); do
      busy=0
      recs=$(show "$array_id"; show "$merge_id") || exit 1
      while IFS= read -r rec; do
        [ -n "$rec" ] || continue
        terminal "$(field JobState "$rec")" || busy=1
      done <<<"$recs"
      [ "$busy" = 0 ] && break
      sleep 1
    done
    [ "$busy" = 0 ] || note "warning: jobs $array_id / $merge_id still not finished after cancelling"
    echo "job logs: $log_dir (shard-${array_id}_<task>.out, merge-${merge_id}.out)"
    exit 1
  fi
  if terminal "$merge_state"; then
    break
  fi
  sleep "$poll"
done

status=0
for ((t = 0; t < shards; t++)); do
  st=${task_state[$t]:-MISSING} ex=${task_exit[$t]:-?}
  if [ "$st" != COMPLETED ] || [ "$ex" != 0:0 ]; then
    note "shard $t/$shards (job ${array_id}_$t): $st, exit code $ex"
    status=1
  fi
done
if [ "$merge_state" != COMPLETED ] || [ "$merge_exit" != 0:0 ]; then
  note "merge (job $merge_id): $merge_state, exit code $merge_exit"
  status=1
fi
if [ "$status" = 0 ]; then
  note "all $shards shards and the merge completed"
fi
echo "job logs: $log_dir (shard-${array_id}_<task>.out, merge-${merge_id}.out)"
exit "$status"
