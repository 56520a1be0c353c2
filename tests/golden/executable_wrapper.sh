#!/usr/bin/env bash
# Job wrapper of b2batch for task Reconstruct_mu_mu_42_16271d1000.
# Every value below is shell-quoted by the one `quote` filter of b2batch.wrapper.
mkdir -p '<BASE>/logs/run_number=42/channel=mu mu/Reconstruct'
exec >>'<BASE>/logs/run_number=42/channel=mu mu/Reconstruct/stdout' 2>>'<BASE>/logs/run_number=42/channel=mu mu/Reconstruct/stderr'
exit_code_file=<BASE>/task_files/Reconstruct/Reconstruct_mu_mu_42_16271d1000/exit_code
setup_failed_file=<BASE>/task_files/Reconstruct/Reconstruct_mu_mu_42_16271d1000/setup_failed
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
echo "b2batch: job of task "Reconstruct_mu_mu_42_16271d1000" started on $(hostname) at $(date -Is)"
# An `exit` in env_script ends the job here: write_exit_code turns it into exit code 3. (`.`: sh has no `source`.)
b2batch_sourcing=<BASE>/setup.sh
. <BASE>/setup.sh || { b2batch_sourcing=; setup_failed "sourcing env_script "<BASE>/setup.sh" failed"; }
b2batch_sourcing=
export OMP_NUM_THREADS=1
export LABEL='it'"'"'s $HOME; `x`'
cd <BASE> || setup_failed "cannot change into working_dir "<BASE>
<PYTHON> <ENTRY_POINT> <BASE>/task_files/Reconstruct/Reconstruct_mu_mu_42_16271d1000/job.json &
child=$!
wait "$child"
