#!/usr/bin/env bash
# Run the toolkit sharded on Slurm:  scripts/slurm/run.sh [--resume] CONFIG N [-- SBATCH_OPTION...]
#
# Submits three jobs and waits for them:
#   shards.sbatch  a job array of N tasks (shard i/N: ingest then audit of that shard);
#   merge.sbatch   ingest merge and audit merge, after every task succeeded (afterok);
#   replay.sbatch  `pipeline run --from-shards`: replay, report and provenance.json,
#                  after the merge succeeded (afterok).
# The jobs run in the config's directory with this shell's environment (PATH included) plus
# CONFIG=<absolute config path>, SHARDS=N and SLURM_LOG_DIR=<absolute log directory>. Job
# output goes to $SLURM_LOG_DIR (default ./slurm-logs in the config's directory):
# shard-<array id>_<task>.out, merge-<job id>.out, replay-<job id>.out, and beside each the
# job script's exit record (.exit).
#
# A failed shard does not stop the others: they finish, run.sh names every shard that failed,
# the merge and the replay never run, and it exits 1. `--resume` submits only the shards
# without a finished record of this config (run_dir/shards/I-of-N/audit.shard.json, not older
# than the shard's ingest.shard.json), e.g. --array=3,7, then the merge and the replay.
# Status comes from `scontrol show job`; a job Slurm no longer remembers (slurm.conf's
# MinJobAge) is looked up with `sacct`, and where sacct has no record of it either, in the
# shard's finished record and the job script's exit record. Requeued jobs (preemption,
# node failure) are waited for, not counted as failed.
#
# Options of the jobs: everything after `--` goes to all three sbatch calls; per job,
# SHARD_TIME, SHARD_MEM, SHARD_CPUS (and MERGE_*, REPLAY_*) become --time, --mem and
# --cpus-per-task, and SHARD_SBATCH, MERGE_SBATCH, REPLAY_SBATCH add options (split at
# spaces) to that job's sbatch alone. sbatch's own input variables (SBATCH_PARTITION, ...)
# apply too. RUN_MAX_PARALLEL=K runs at most K shards at once (%K). RUN_POLL sets the seconds
# between polls (default 5); RUN_REQUEUE_GRACE (default 60) how long a job that scontrol
# shows PREEMPTED or NODE_FAIL, and that Slurm may still requeue, is waited for.
#
# One run.sh per run directory: run_dir/.slurm-run.lock, created exclusively (no flock
# needed), names the holder's host, pid and jobs; a lock whose holder is gone is taken over
# only when it was held on this host (and none of its jobs is still queued or running).
# Ctrl-C (or TERM) cancels the jobs. Exit: 0 all succeeded, 1 a job failed, 2 bad usage.
set -euo pipefail

prog=run.sh
die() { echo "$prog: error: $*" >&2; exit 1; }
note() { echo "$prog: $*" >&2; }
usage() {
  echo "usage: $prog [--resume] CONFIG N [-- SBATCH_OPTION...]" >&2
  exit 2
}

resume=0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --resume) resume=1 ;;
    --) shift; break ;;
    -h | --help) usage ;;
    -*) echo "$prog: unknown option $1" >&2; usage ;;
    *) args+=("$1") ;;
  esac
  shift
done
common_opts=("$@")
[ ${#args[@]} -eq 2 ] || usage
config_arg=${args[0]}
shards=${args[1]}
case "$shards" in '' | *[!0-9]*) die "N must be a positive integer, not '$shards'" ;; esac
shards=$((10#$shards))
[ "$shards" -ge 1 ] || die "N must be at least 1"
[ -f "$config_arg" ] || die "config $config_arg not found"
for c in sbatch scontrol scancel squeue; do
  command -v "$c" >/dev/null 2>&1 || die "$c is not on PATH (is this a Slurm submit host?)"
done
poll=${RUN_POLL:-5}
grace=${RUN_REQUEUE_GRACE:-60}
case "$poll" in '' | *[!0-9.]*) die "RUN_POLL must be a number of seconds, not '$poll'" ;; esac
case "$grace" in '' | *[!0-9]*) die "RUN_REQUEUE_GRACE must be a whole number of seconds, not '$grace'" ;; esac
throttle=""
if [ -n "${RUN_MAX_PARALLEL:-}" ]; then
  case "$RUN_MAX_PARALLEL" in *[!0-9]* | 0*) die "RUN_MAX_PARALLEL must be a positive integer, not '$RUN_MAX_PARALLEL'" ;; esac
  throttle="%$RUN_MAX_PARALLEL"
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
config_dir=$(cd "$(dirname "$config_arg")" && pwd -P)
config=$config_dir/$(basename "$config_arg")
cd "$config_dir"

# run_dir: the config's top-level `run_dir:` (a plain one-line value), against its directory.
run_dir_of() {
  local lines n v
  lines=$(grep -n -E '^run_dir[[:space:]]*:' "$1" || true)
  n=$(grep -c . <<<"$lines" || true)
  [ "$n" = 1 ] || die "$1: expected one top-level run_dir: line, found $n"
  v=${lines#*:}
  v=${v#*:}
  v=$(sed -E 's/[[:space:]]+#.*$//; s/^[[:space:]]+//; s/[[:space:]]+$//' <<<"$v")
  case "$v" in
    \"*\") v=${v#\"}; v=${v%\"} ;;
    \'*\') v=${v#\'}; v=${v%\'} ;;
  esac
  case "$v" in
    '' | [\|\>\{\[\&\*\!]* | *\\* | *\"* | *\'*)
      die "$1 line ${lines%%:*}: run.sh reads run_dir only as a plain one-line value (run_dir: runs/x), not '$v'" ;;
  esac
  case "$v" in /*) echo "$v" ;; *) echo "$config_dir/$v" ;; esac
}
run_dir=$(run_dir_of "$config")
mkdir -p "$run_dir" || die "cannot create run directory $run_dir"
run_dir=$(cd "$run_dir" && pwd -P)
log_dir=${SLURM_LOG_DIR:-./slurm-logs}
mkdir -p "$log_dir" || die "cannot create log directory $log_dir"
log_dir=$(cd "$log_dir" && pwd -P)
config_sha=$(sha256sum "$config") || die "cannot read $config"
config_sha=${config_sha%% *}

# --- the array size this cluster accepts ------------------------------------------------
max_array=$(scontrol show config 2>/dev/null | awk -F' = ' '$1 ~ /^MaxArraySize[[:space:]]*$/ { print $2 + 0 }') || true
[ -n "$max_array" ] || die "cannot read MaxArraySize from \`scontrol show config\` (is slurmctld reachable? SLURM_CONF=${SLURM_CONF:-unset})"
if [ "$shards" -gt "$max_array" ]; then
  die "N=$shards needs array indices 0..$((shards - 1)), but this cluster's MaxArraySize is $max_array (indices must be below it; see \`scontrol show config | grep MaxArraySize\`): use N <= $max_array"
fi

# --- the run lock -----------------------------------------------------------------------
lock_file=$run_dir/.slurm-run.lock
host=$(uname -n)
proc_start() { # the start time of process $1 (clock ticks since boot), empty if unknown
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  s=${s##*) }
  awk '{ print $20 }' <<<"$s"
}
lock_field() { sed -n "s/^$1=//p" "$lock_file" 2>/dev/null | head -n 1; }
lock_ours=0
take_lock() {
  local me h p s jobs active
  me=$(printf 'host=%s\npid=%s\nstart=%s\nsince=%s\nconfig=%s\n' "$host" "$$" "$(proc_start $$)" \
    "$(date -u +%FT%TZ)" "$config")
  for _ in 1 2 3; do
    if (set -C && printf '%s\n' "$me" >"$lock_file") 2>/dev/null; then
      lock_ours=1
      return 0
    fi
    [ -e "$lock_file" ] || {
      # Not there, yet not created: the directory refuses new files.
      (set -C && printf '%s\n' "$me" >"$lock_file") || die "cannot create the run lock $lock_file"
    }
    h=$(lock_field host) p=$(lock_field pid) s=$(lock_field start) jobs=$(lock_field jobs)
    local who
    who="run.sh pid ${p:-?} on host ${h:-?} since $(lock_field since)"
    if [ "$h" != "$host" ]; then
      die "run directory $run_dir is in use by $who (lock $lock_file); if that run.sh is gone, remove the lock"
    fi
    if [ -n "$p" ] && [ -d "/proc/$p" ] && { [ -z "$s" ] || [ "$(proc_start "$p")" = "$s" ]; }; then
      die "run directory $run_dir is in use by $who (lock $lock_file); wait for it, or stop it"
    fi
    if [ -n "$jobs" ]; then
      active=$(squeue -h -j "$jobs" -o %i 2>/dev/null | tr '\n' ' ') || active=""
      [ -z "${active// /}" ] || die "run directory $run_dir: $who is gone, but its jobs $active are still queued or running; wait for them or scancel them, then rerun"
    fi
    # Stale (its holder on this host is dead): break it, one breaker at a time.
    if mkdir "$lock_file.break" 2>/dev/null; then
      if [ "$(lock_field pid)" = "$p" ] && [ "$(lock_field start)" = "$s" ]; then
        note "taking over the stale lock of $who (that process is gone)"
        rm -f "$lock_file"
      fi
      rmdir "$lock_file.break"
    else
      sleep 1
    fi
  done
  die "cannot take the run lock $lock_file (another run.sh keeps taking it)"
}
# shellcheck disable=SC2317  # called by the EXIT trap
release_lock() {
  if [ "$lock_ours" = 1 ] && [ "$(lock_field pid)" = "$$" ] && [ "$(lock_field host)" = "$host" ]; then
    rm -f "$lock_file"
  fi
  lock_ours=0
}
take_lock
trap release_lock EXIT

# --- which shards to run ----------------------------------------------------------------
# shard_done I: shard I/N has a finished record of this config, not older than its ingest's.
shard_done() {
  local d=$run_dir/shards/$1-of-$shards
  [ -f "$d/audit.shard.json" ] && [ -f "$d/ingest.shard.json" ] &&
    ! [ "$d/audit.shard.json" -ot "$d/ingest.shard.json" ] &&
    grep -q "\"config_sha256\": *\"$config_sha\"" "$d/audit.shard.json"
}
todo=()
for ((t = 0; t < shards; t++)); do
  if [ "$resume" = 1 ] && shard_done "$t"; then continue; fi
  todo+=("$t")
done
# ranges 0 1 2 5 7 8 -> 0-2,5,7-8
ranges() {
  local out="" a="" b="" x
  for x in "$@"; do
    if [ -n "$a" ] && [ "$x" = $((b + 1)) ]; then b=$x; continue; fi
    [ -z "$a" ] || out+="${out:+,}$a$([ "$a" = "$b" ] || echo "-$b")"
    a=$x b=$x
  done
  [ -z "$a" ] || out+="${out:+,}$a$([ "$a" = "$b" ] || echo "-$b")"
  echo "$out"
}
if [ "$resume" = 1 ]; then
  if [ ${#todo[@]} -eq 0 ]; then
    note "--resume: all $shards shards have a finished record; submitting only the merge and the replay"
  else
    note "--resume: shards without a finished record: $(ranges "${todo[@]}") ($((shards - ${#todo[@]})) of $shards done)"
  fi
fi

# --- submit -----------------------------------------------------------------------------
export CONFIG=$config SHARDS=$shards SLURM_LOG_DIR=$log_dir

# job_opts PREFIX: the sbatch options of one job from PREFIX_TIME, _MEM, _CPUS, _SBATCH.
job_opts() {
  local t m c extra
  t=${1}_TIME m=${1}_MEM c=${1}_CPUS extra=${1}_SBATCH
  [ -z "${!t:-}" ] || echo "--time=${!t}"
  [ -z "${!m:-}" ] || echo "--mem=${!m}"
  [ -z "${!c:-}" ] || echo "--cpus-per-task=${!c}"
  # shellcheck disable=SC2086  # split at spaces, as documented
  [ -z "${!extra:-}" ] || printf '%s\n' ${!extra}
}

array_id="" merge_id="" replay_id=""
cancel_all() {
  local ids=()
  [ -z "$replay_id" ] || ids+=("$replay_id")
  [ -z "$merge_id" ] || ids+=("$merge_id")
  [ -z "$array_id" ] || ids+=("$array_id")
  [ ${#ids[@]} -eq 0 ] || scancel "${ids[@]}" 2>/dev/null || true
}
# shellcheck disable=SC2317  # called by the trap below
on_signal() {
  trap - INT TERM
  note "interrupted: cancelling jobs ${array_id:-} ${merge_id:-} ${replay_id:-}"
  cancel_all
  exit 130
}
trap on_signal INT TERM

# submit WHAT OPTION...: sbatch's job id, or die with sbatch's own message.
submit() {
  local what=$1 out err
  shift
  err=$(mktemp)
  if ! out=$(sbatch --parsable --export=ALL --chdir="$config_dir" "$@" 2>"$err"); then
    local msg
    msg=$(grep -v '^$' "$err" | tail -n 3 | tr '\n' ' ')
    rm -f "$err"
    cancel_all
    die "sbatch of the $what failed: ${msg:-no message}(earlier jobs of this run cancelled)"
  fi
  rm -f "$err"
  echo "${out%%;*}"
}
mapfile -t shard_opts < <(job_opts SHARD)
mapfile -t merge_opts < <(job_opts MERGE)
mapfile -t replay_opts < <(job_opts REPLAY)
dep=()
if [ ${#todo[@]} -gt 0 ]; then
  array_id=$(submit "shard array" --array="$(ranges "${todo[@]}")$throttle" \
    --output="$log_dir/shard-%A_%a.out" "${common_opts[@]}" "${shard_opts[@]}" "$here/shards.sbatch")
  dep=(--dependency="afterok:$array_id" --kill-on-invalid-dep=yes)
fi
merge_id=$(submit merge "${dep[@]}" --output="$log_dir/merge-%j.out" \
  "${common_opts[@]}" "${merge_opts[@]}" "$here/merge.sbatch")
replay_id=$(submit replay --dependency="afterok:$merge_id" --kill-on-invalid-dep=yes \
  --output="$log_dir/replay-%j.out" "${common_opts[@]}" "${replay_opts[@]}" "$here/replay.sbatch")
echo "jobs=$array_id${array_id:+,}$merge_id,$replay_id" >>"$lock_file"
note "submitted shard array ${array_id:-(none)} (${#todo[@]} tasks: ${todo[*]:+$(ranges "${todo[@]}")}), merge $merge_id, replay $replay_id; logs in $log_dir"

# --- status -----------------------------------------------------------------------------
# A state is final when Slurm will not run the job again. PREEMPTED and NODE_FAIL are final
# only once Slurm did not requeue the job (see requeue_wait); every other state (PENDING,
# RUNNING, REQUEUED, REQUEUE_HOLD, REQUEUE_FED, RESIZING, SUSPENDED, ...) is waited for.
final_state() {
  case "$1" in
    COMPLETED | FAILED | CANCELLED | TIMEOUT | BOOT_FAIL | DEADLINE | OUT_OF_MEMORY | LOST) return 0 ;;
    *) return 1 ;;
  esac
}

# scontrol_records ID: "key state exit restarts requeue reason" per job of ID (key: the array
# task id, or "-" for a plain job; a pending rest of an array gives one line per task id),
# nothing when slurmctld no longer knows ID; dies when slurmctld cannot be asked.
scontrol_records() {
  local out
  for _ in 1 2 3 4 5; do
    if out=$(scontrol show job -o "$1" 2>&1); then
      awk '
        function get(k,   i) { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) return substr($i, length(k) + 2); return "" }
        NF == 0 { next }
        {
          tid = get("ArrayTaskId"); st = get("JobState"); ex = get("ExitCode")
          rs = get("Restarts"); rq = get("Requeue"); re = get("Reason")
          if (rs == "") rs = 0; if (rq == "") rq = 1; if (re == "") re = "None"
          if (tid == "") { print "-", st, ex, rs, rq, re; next }
          sub(/%.*/, "", tid)
          n = split(tid, parts, ",")
          for (p = 1; p <= n; p++) {
            step = 1; r = parts[p]
            if (r ~ /:/) { step = substr(r, index(r, ":") + 1); r = substr(r, 1, index(r, ":") - 1) }
            if (r ~ /-/) { a = substr(r, 1, index(r, "-") - 1) + 0; b = substr(r, index(r, "-") + 1) + 0 }
            else { a = r + 0; b = a }
            for (x = a; x <= b; x += step) print x, st, ex, rs, rq, re
          }
        }' <<<"$out"
      return 0
    fi
    case "$out" in *"Invalid job id"*) return 0 ;; esac
    sleep 2
  done
  die "scontrol show job $1 failed 5 times: $out"
}

# sacct_records ID...: "jobid[_task] state exit" per job Slurm's accounting knows; returns 1
# (after saying why, once) when sacct cannot answer.
sacct_said=0
sacct_records() {
  local out
  if ! command -v sacct >/dev/null 2>&1; then
    out="sacct is not on PATH"
  elif out=$(sacct -n -P -X -j "$(IFS=,; echo "$*")" -o JobID,State,ExitCode 2>&1); then
    awk -F'|' 'NF >= 3 && $1 ~ /^[0-9]+(_[0-9]+)?$/ { split($2, s, " "); print $1, s[1], $3 }' <<<"$out"
    return 0
  fi
  if [ "$sacct_said" = 0 ]; then
    note "sacct cannot answer ($(head -n 1 <<<"$out")); jobs Slurm has forgotten are judged by their finished records on disk"
    sacct_said=1
  fi
  return 1
}

# exit_record FILE: "COMPLETED 0:0" or "FAILED <code>:0" from a job script's exit record.
exit_record() {
  local code
  code=$(tr -dc '0-9' <"$1" 2>/dev/null) || true
  [ -n "$code" ] || return 1
  if [ "$code" = 0 ]; then echo "COMPLETED 0:0"; else echo "FAILED $code:0"; fi
}

# disk_state KEY: the state of a job Slurm has forgotten, from what it left on disk.
disk_state() {
  local key=$1 f d
  case "$key" in
    merge) f=$log_dir/merge-$merge_id.exit ;;
    replay) f=$log_dir/replay-$replay_id.exit ;;
    *)
      d=$run_dir/shards/$key-of-$shards
      if shard_done "$key" && [ "$d/audit.shard.json" -nt "$lock_file" ]; then
        echo "COMPLETED 0:0 its finished record $d/audit.shard.json"
        return 0
      fi
      f=$log_dir/shard-${array_id}_$key.exit
      ;;
  esac
  if [ -f "$f" ] && exit_record "$f" >/dev/null; then
    echo "$(exit_record "$f") its exit record $f"
  else
    echo "LOST ? nothing: forgotten by slurmctld, unknown to sacct, no finished or exit record on disk"
  fi
}

declare -A state exit_code source restarts held_said first_seen
for t in "${todo[@]}"; do state[$t]=PENDING; done
state[merge]=PENDING state[replay]=PENDING
merge_reason="" replay_reason=""
declare -A failed_noted

label() {
  case "$1" in
    merge) echo "merge (job $merge_id)" ;;
    replay) echo "replay (job $replay_id)" ;;
    *) echo "shard $1/$shards (job ${array_id}_$1)" ;;
  esac
}

# update KEY STATE EXIT RESTARTS REQUEUE REASON: one observation of a job from scontrol.
update() {
  local key=$1 st=${2%%+*} ex=$3 rs=$4 rq=$5 re=$6 now
  now=$SECONDS
  if [ "$rs" != 0 ] && [ "${restarts[$key]:-0}" != "$rs" ]; then
    note "$(label "$key") was requeued by Slurm (restart $rs, now $st); waiting for it"
    restarts[$key]=$rs
  fi
  # Slurm may requeue a preempted or node-failed job (Requeue=1): wait RUN_REQUEUE_GRACE
  # seconds for that before taking the state as final.
  if [ "$st" = PREEMPTED ] || [ "$st" = NODE_FAIL ]; then
    if [ "$rq" != 0 ]; then
      [ -n "${first_seen[$key]:-}" ] || first_seen[$key]=$now
      [ $((now - first_seen[$key])) -ge "$grace" ] || st="$st(may-be-requeued)"
    fi
  else
    unset "first_seen[$key]"
  fi
  if [ "$st" = REQUEUE_HOLD ] || [ "$st" = SPECIAL_EXIT ] || [[ "$re" == JobHeld* ]]; then
    if [ -z "${held_said[$key]:-}" ]; then
      note "$(label "$key") is held ($st, $re): release it with \`scontrol release $(job_of "$key")\`"
      held_said[$key]=1
    fi
  fi
  state[$key]=$st exit_code[$key]=$ex source[$key]=scontrol
  case "$key" in merge) merge_reason=$re ;; replay) replay_reason=$re ;; esac
}
job_of() {
  case "$1" in merge) echo "$merge_id" ;; replay) echo "$replay_id" ;; *) echo "${array_id}_$1" ;; esac
}

poll_all() {
  local key st ex rs rq re missing=() line id recs
  declare -A seen=()
  if [ -n "$array_id" ]; then
    recs=$(scontrol_records "$array_id") || exit 1
    while read -r key st ex rs rq re; do
      if [ -z "$key" ] || [ -z "${state[$key]+x}" ]; then continue; fi
      final_state "${state[$key]}" && continue
      seen[$key]=1
      update "$key" "$st" "$ex" "$rs" "$rq" "$re"
    done <<<"$recs"
  fi
  for key in merge replay; do
    final_state "${state[$key]}" && continue
    recs=$(scontrol_records "$(job_of "$key")") || exit 1
    line=$(head -n 1 <<<"$recs")
    [ -n "$line" ] || continue
    seen[$key]=1
    read -r _ st ex rs rq re <<<"$line"
    update "$key" "$st" "$ex" "$rs" "$rq" "$re"
  done
  for key in "${todo[@]}" merge replay; do
    final_state "${state[$key]}" && continue
    [ -n "${seen[$key]:-}" ] || missing+=("$key")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  # Forgotten by slurmctld: ask the accounting, then the disk.
  declare -A acct=()
  local ids=()
  for key in "${missing[@]}"; do ids+=("$(job_of "$key")"); done
  while read -r id st ex; do
    [ -n "$id" ] && acct[$id]="$st $ex"
  done < <(sacct_records "${ids[@]}" || true)
  for key in "${missing[@]}"; do
    id=$(job_of "$key")
    st="" ex=""
    [ -z "${acct[$id]:-}" ] || read -r st ex <<<"${acct[$id]}"
    # slurmctld forgets only finished jobs: a final state in sacct is the answer; without
    # one (no record yet, or a record the accounting did not close), the disk's.
    if [ -n "$st" ] && final_state "$st"; then
      state[$key]=$st exit_code[$key]=$ex source[$key]=sacct
    else
      read -r st ex rest <<<"$(disk_state "$key")"
      state[$key]=$st exit_code[$key]=$ex source[$key]=${rest:-disk}
    fi
  done
}

ok() { [ "${state[$1]}" = COMPLETED ] && [ "${exit_code[$1]}" = 0:0 ]; }

last_progress=""
while :; do
  poll_all
  done_n=0 run_n=0 bad=()
  for t in "${todo[@]}"; do
    if final_state "${state[$t]}"; then
      done_n=$((done_n + 1))
      if ! ok "$t"; then
        bad+=("$t")
        if [ -z "${failed_noted[$t]:-}" ]; then
          failed_noted[$t]=1
          note "failed: $(label "$t"): ${state[$t]}, exit code ${exit_code[$t]} (from ${source[$t]}); the other shards go on"
        fi
      fi
    elif [ "${state[$t]}" = RUNNING ] || [ "${state[$t]}" = COMPLETING ]; then
      run_n=$((run_n + 1))
    fi
  done
  progress="shards: $done_n of ${#todo[@]} finished (${#bad[@]} failed), $run_n running; merge: ${state[merge]}; replay: ${state[replay]}"
  if [ "$progress" != "$last_progress" ]; then
    note "$progress"
    last_progress=$progress
  fi
  # Done when every shard is final and the merge and replay are final or can never start.
  if [ "$done_n" = ${#todo[@]} ]; then
    if [ ${#bad[@]} -gt 0 ]; then break; fi
    if final_state "${state[merge]}" && ! ok merge; then break; fi
    if [ "$merge_reason" = DependencyNeverSatisfied ] || [ "$replay_reason" = DependencyNeverSatisfied ]; then break; fi
    if final_state "${state[replay]}"; then break; fi
  fi
  sleep "$poll"
done

status=0
for t in "${todo[@]}"; do
  if ! ok "$t"; then
    note "shard $t/$shards (job ${array_id}_$t): ${state[$t]}, exit code ${exit_code[$t]} (from ${source[$t]})"
    status=1
  fi
done
if [ "$status" = 1 ]; then
  failed_list=()
  for t in "${todo[@]}"; do ok "$t" || failed_list+=("$t"); done
  note "${#failed_list[@]} of ${#todo[@]} shards failed ($(ranges "${failed_list[@]}")); the merge and the replay were not run"
  # The merge and replay can never start now; make sure they do not linger.
  scancel "$merge_id" "$replay_id" 2>/dev/null || true
  note "after fixing the cause, rerun only those shards: $here/run.sh --resume $config_arg $shards"
else
  for key in merge replay; do
    if ! ok "$key"; then
      note "$(label "$key"): ${state[$key]}, exit code ${exit_code[$key]} (from ${source[$key]})"
      status=1
    fi
  done
  [ "$status" = 0 ] || scancel "$replay_id" 2>/dev/null || true
fi
n_ctl=0 n_acct=0 n_disk=0
for key in "${todo[@]}" merge replay; do
  case "${source[$key]:-}" in
    scontrol) n_ctl=$((n_ctl + 1)) ;;
    sacct) n_acct=$((n_acct + 1)) ;;
    '') ;;
    *) n_disk=$((n_disk + 1)) ;;
  esac
done
note "final states read from: scontrol $n_ctl, sacct $n_acct, records on disk $n_disk"
if [ "$status" = 0 ]; then
  note "all ${#todo[@]} submitted shards (of $shards), the merge and the replay completed"
fi
echo "job logs: $log_dir (shard-${array_id:-none}_<task>.out, merge-$merge_id.out, replay-$replay_id.out)"
exit "$status"
