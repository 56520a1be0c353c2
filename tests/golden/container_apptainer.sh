#!/usr/bin/env bash
# Job wrapper of b2batch for task Reconstruct_42_28f34e2549.
# Every value below is shell-quoted by the one `quote` filter of b2batch.wrapper.
mkdir -p <BASE>/logs/run_number=42/Reconstruct
exec >><BASE>/logs/run_number=42/Reconstruct/stdout 2>><BASE>/logs/run_number=42/Reconstruct/stderr
exit_code_file=<BASE>/task_files/Reconstruct/Reconstruct_42_28f34e2549/exit_code
setup_failed_file=<BASE>/task_files/Reconstruct/Reconstruct_42_28f34e2549/setup_failed
child=
b2batch_sourcing=
# The job's own set-up failed (not the task): say why in stderr and in a marker file, exit with 3.
setup_failed() {
    echo "b2batch: $1" >&2
    printf '%s\n' "$1" > "$setup_failed_file"
    exit 3
}
b2batch_started=$(date +%s.%N 2>/dev/null || date +%s)
# What the job used, beside its exit code (b2batch.engine.usage): wall time, the CPU time of everything the
# wrapper waited for (the shell's `times`, read from a file: a subshell would count none), the host, and the
# peak RSS the command left in peak_rss (b2batch's job entry writes it). Figures even without accounting.
write_usage() {
    usage_file=${exit_code_file%/*}/usage.json
    times > "$usage_file.times.$$" 2>/dev/null || return 0
    b2batch_ended=$(date +%s.%N 2>/dev/null || date +%s)
    b2batch_rss=$(cat "${exit_code_file%/*}/peak_rss" 2>/dev/null)
    awk -v start="$b2batch_started" -v end="$b2batch_ended" -v host="$(hostname)" -v rss="$b2batch_rss" '
        function secs(t,  m) { m = index(t, "m"); return substr(t, 1, m - 1) * 60 + substr(t, m + 1, length(t) - m - 1) }
        NR == 2 { cpu = secs($1) + secs($2) }
        END { printf "{\"wall\": %.3f, \"cpu\": %.3f, \"host\": \"%s\"%s, \"source\": \"wrapper\"}\n", end - start, cpu,
              host, (rss ~ /^[0-9]+$/ ? ", \"max_rss\": " rss : "") }' "$usage_file.times.$$" > "$usage_file.tmp.$$" &&
        mv -f "$usage_file.tmp.$$" "$usage_file"
    rm -f "$usage_file.times.$$" "$usage_file.tmp.$$"
}
write_exit_code() {
    code=$?
    if [ -n "$b2batch_sourcing" ]; then
        reason="env_script $b2batch_sourcing exited (status $code) while being sourced"
        echo "b2batch: $reason" >&2
        printf '%s\n' "$reason" > "$setup_failed_file"
        code=3
    fi
    write_usage
    printf '%s\n' "$code" > "$exit_code_file.tmp.$$" && mv -f "$exit_code_file.tmp.$$" "$exit_code_file"
    exit "$code"
}
forward_signal() {
    b2batch_sourcing=
    [ -n "$child" ] && kill -TERM "$child" 2>/dev/null
    [ -n "$child" ] && wait "$child"
    exit "$1"
}
trap write_exit_code EXIT
trap 'forward_signal 143' TERM
trap 'forward_signal 130' INT
trap 'forward_signal 129' HUP
trap 'forward_signal 138' USR1
trap 'forward_signal 140' USR2
echo "b2batch: job of task "Reconstruct_42_28f34e2549" started on $(hostname) at $(date -Is)"
export OMP_NUM_THREADS=1
export LABEL='it'"'"'s $HOME'
cd <BASE> || setup_failed "cannot change into working_dir "<BASE>
# The command runs in a apptainer container (setting container), which sources env_script and sets env.
command -v apptainer >/dev/null 2>&1 || setup_failed "task "Reconstruct_42_28f34e2549": the container engine "apptainer" (setting container) is not on PATH on $(hostname): install apptainer there or name its full path in the setting"
[ -e /cvmfs/belle.cern.ch/images/belle2-base-el9 ] || setup_failed "task "Reconstruct_42_28f34e2549": the container image "/cvmfs/belle.cern.ch/images/belle2-base-el9" (setting container) is not on $(hostname): make it reachable there or fix the setting"
apptainer exec --bind=/cvmfs --bind=/data:/in:ro --bind=<BASE> --bind=<B2BATCH> --pwd=<BASE> --cleanenv /cvmfs/belle.cern.ch/images/belle2-base-el9 bash -c 'b2batch_source() { b2batch_file=$1; shift; . "$b2batch_file"; }; if [ -n "$1" ]; then b2batch_source "$1" || { echo "b2batch: sourcing env_script $1 failed in the container" >&2; echo "sourcing env_script $1 failed in the container" > "$2"; exit 3; }; fi; shift 2; while [ "$1" != -- ]; do export "$1"; shift; done; shift; exec "$@"' b2batch <BASE>/setup.sh <BASE>/task_files/Reconstruct/Reconstruct_42_28f34e2549/setup_failed OMP_NUM_THREADS=1 'LABEL=it'"'"'s $HOME' -- python3 <ENTRY_POINT> <BASE>/task_files/Reconstruct/Reconstruct_42_28f34e2549/job.json &
child=$!
wait "$child"
