#!/usr/bin/env bash
# A real single-node (Son of) Sun Grid Engine for b2batch's integration tests.
#
#   tests/clusters/sge.sh start    install if needed, configure, start if not running (idempotent)
#   tests/clusters/sge.sh stop     stop exactly the daemons this script started, wait until they exit
#   tests/clusters/sge.sh restart  stop, then start
#   tests/clusters/sge.sh status   exit 0 when the cluster accepts jobs
#
# Debian 12's gridengine-master/-exec/-client (SGE 8.1.9), SGE_ROOT=/var/lib/gridengine, cell "default",
# qmaster on port 6444, execd on 6445. No systemd: the daemons run in the foreground (SGE_ND=1) in their
# own session; their PIDs are kept in $STATE_DIR. Meant to run as root, without stdin, beside Slurm.
#
# Environment (optional):
#   B2BATCH_SGE_STATE_DIR  pid files and daemon logs (default /var/lib/b2batch-sge)
#   B2BATCH_SGE_SLOTS      slots of the queue all.q (default 16)
set -euo pipefail

export SGE_ROOT=/var/lib/gridengine
export SGE_CELL=default
COMMON=$SGE_ROOT/$SGE_CELL/common
SPOOL=/var/spool/gridengine
STATE_DIR=${B2BATCH_SGE_STATE_DIR:-/var/lib/b2batch-sge}
SLOTS=${B2BATCH_SGE_SLOTS:-16}
QUEUE=all.q
PE=smp
POLICY_LOCK=/var/lock/b2batch-policy-rc.lock
POLICY_FILE=/usr/sbin/policy-rc.d
POLICY_MARK=b2batch-sge
PACKAGES=(gridengine-master gridengine-exec gridengine-client)

QMASTER_BIN=/usr/lib/gridengine/sge_qmaster
EXECD_BIN=/usr/lib/gridengine/sge_execd

log() { printf 'sge.sh: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ $(id -u) == 0 ]] || die "must run as root"
export DEBIAN_FRONTEND=noninteractive
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

# The short host name, computed at run time (CI machines have other names).
HOST=$(hostname -s)

# --------------------------------------------------------------------------------------------- install

installed() {
    [[ -x /usr/sbin/sge_qmaster && -x /usr/sbin/sge_execd && -x $QMASTER_BIN && -x $EXECD_BIN ]] || return 1
    local c
    for c in qsub qconf qstat qacct qdel qhost; do command -v "$c" >/dev/null || return 1; done
}

POLICY_CREATED=0
remove_policy() {
    if [[ $POLICY_CREATED == 1 ]] && grep -q "$POLICY_MARK" "$POLICY_FILE" 2>/dev/null; then
        rm -f "$POLICY_FILE"
    fi
    POLICY_CREATED=0
}

apt_update() {
    local i
    for i in $(seq 1 30); do
        if apt-get -q -o DPkg::Lock::Timeout=900 update </dev/null >"$STATE_DIR/apt-update.log" 2>&1; then
            return 0
        fi
        log "apt-get update failed (attempt $i, lists lock busy?), retrying in 10 s"
        sleep 10
    done
    tail -n 20 "$STATE_DIR/apt-update.log" >&2
    die "apt-get update failed; see $STATE_DIR/apt-update.log"
}

apt_install() {
    apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=900 \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        "${PACKAGES[@]}" </dev/null >>"$STATE_DIR/apt-install.log" 2>&1
}

preseed() {
    local p i sel=""
    for p in gridengine-common gridengine-master gridengine-exec gridengine-client; do
        sel+="$p shared/gridengineconfig boolean true"$'\n'
        sel+="$p shared/gridenginecell string $SGE_CELL"$'\n'
        sel+="$p shared/gridenginemaster string $HOST"$'\n'
    done
    # The debconf database is locked while another dpkg run asks its questions: retry.
    for i in $(seq 1 90); do
        if printf '%s' "$sel" | debconf-set-selections 2>>"$STATE_DIR/apt-install.log"; then return 0; fi
        sleep 10
    done
    die "debconf-set-selections failed (debconf database locked?)"
}

install_packages() {
    installed && return 0
    log "installing ${PACKAGES[*]} (log: $STATE_DIR/apt-install.log)"
    local t0=$SECONDS
    # One lock shared with the other cluster scripts around the policy-rc.d file and apt: the file is
    # written only when absent and removed only when we wrote it.
    exec 9>"$POLICY_LOCK"
    flock -w 1800 9 || die "could not take $POLICY_LOCK"
    trap remove_policy EXIT
    trap 'remove_policy; exit 130' INT TERM HUP
    if [[ ! -e $POLICY_FILE ]]; then
        printf '#!/bin/sh\n# %s: no service starts during apt-get install\nexit 101\n' "$POLICY_MARK" >"$POLICY_FILE"
        chmod 0755 "$POLICY_FILE"
        POLICY_CREATED=1
    fi
    : >"$STATE_DIR/apt-install.log"
    preseed
    if ! apt-cache show gridengine-master >/dev/null 2>&1 \
        || [[ -z $(apt-cache policy gridengine-master 2>/dev/null | awk '/Candidate:/ && $2 != "(none)" {print $2}') ]]; then
        apt_update
    fi
    if ! apt_install; then
        log "apt-get install failed; updating the package lists and trying again"
        apt_update
        apt_install || { tail -n 30 "$STATE_DIR/apt-install.log" >&2; die "apt-get install failed"; }
    fi
    remove_policy
    trap - EXIT INT TERM HUP
    flock -u 9
    exec 9>&-
    installed || die "packages installed but SGE binaries missing"
    # Daemons that a package script started anyway (policy-rc.d removed by someone meanwhile): stop them.
    local s p
    for s in exec:execd master:qmaster; do
        p=/var/run/gridengine/${s#*:}.pid
        if [[ -s $p ]] && kill -0 "$(<"$p")" 2>/dev/null; then
            log "stopping sge_${s#*:} started by the package's init script"
            /etc/init.d/gridengine-${s%%:*} stop </dev/null >/dev/null 2>&1 || true
        fi
    done
    log "installed in $((SECONDS - t0)) s"
}

# The master package initialises the cell only on a fresh install with shared/gridengineconfig=true.
init_cell() {
    if [[ ! -e $SPOOL/spooldb/sge || ! -s $COMMON/bootstrap ]]; then
        log "initialising cell $SGE_CELL"
        [[ -s $COMMON/bootstrap ]] || die "$COMMON/bootstrap missing: reinstall gridengine-common"
        local d
        for d in $SPOOL/qmaster $SPOOL/qmaster/job_scripts $SPOOL/spooldb $SPOOL/execd; do
            mkdir -p "$d" && chown sgeadmin:sgeadmin "$d" && chmod 755 "$d"
        done
        su -s /bin/sh -c "/usr/share/gridengine/scripts/init_cluster $SGE_ROOT $SGE_CELL $SPOOL/spooldb sgeadmin" \
            sgeadmin </dev/null >>"$STATE_DIR/init_cluster.log" 2>&1 || die "init_cluster failed; see $STATE_DIR/init_cluster.log"
    fi
    if [[ ! -s $COMMON/act_qmaster ]]; then
        echo "$HOST" >"$COMMON/act_qmaster"
        chown sgeadmin:sgeadmin "$COMMON/act_qmaster"
        chmod 644 "$COMMON/act_qmaster"
    fi
}

# ----------------------------------------------------------------------------------------- host names

# The name SGE knows this host by: the one in act_qmaster (the host name at install time).
sge_host() { head -n1 "$COMMON/act_qmaster" | awk '{print $1}'; }

# The short host name and localhost both resolve to 127.0.0.1, which resolves back to "localhost";
# qmaster would then reject every client. host_aliases makes all of them one host named like act_qmaster.
# Returns 0 when the file changed.
fix_host_names() {
    if ! getent hosts "$HOST" >/dev/null; then
        log "host name $HOST does not resolve: adding it to /etc/hosts"
        printf '127.0.1.1\t%s\n' "$HOST" >>/etc/hosts
    fi
    local main names=() n want
    main=$(sge_host)
    for n in "$main" "$HOST" "$(hostname)" "$(timeout 5 hostname -f 2>/dev/null || true)" localhost; do
        [[ -n $n ]] || continue
        [[ " ${names[*]} " == *" $n "* ]] || names+=("$n")
    done
    want="${names[*]}"
    if [[ -f $COMMON/host_aliases ]] && [[ $(cat "$COMMON/host_aliases") == "$want" ]]; then
        return 1
    fi
    log "writing $COMMON/host_aliases: $want"
    echo "$want" >"$COMMON/host_aliases"
    chmod 644 "$COMMON/host_aliases"
    return 0
}

# --------------------------------------------------------------------------------------------- daemons

# pid_of NAME -> the PID in our pid file when that process is alive and is the expected binary.
pid_of() {
    local name=$1 bin pid
    case $name in qmaster) bin=$QMASTER_BIN ;; execd) bin=$EXECD_BIN ;; esac
    [[ -s $STATE_DIR/$name.pid ]] || return 1
    pid=$(<"$STATE_DIR/$name.pid")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$bin" ]] || return 1
    echo "$pid"
}

# Processes of the binary that are not ours (another installation, an init script).
foreign_pids() {
    local bin=$1 ours=${2:-} p out=()
    for p in $(pgrep -f "^$bin|^/usr/sbin/${bin##*/}" || true); do
        [[ $p == "$ours" ]] && continue
        [[ $(readlink "/proc/$p/exe" 2>/dev/null) == "$bin" ]] && out+=("$p")
    done
    echo "${out[*]}"
}

launch() {
    local name=$1 pid
    local others
    others=$(foreign_pids "/usr/lib/gridengine/sge_$name")
    [[ -z $others ]] || die "an sge_$name not started by this script is running (pid $others); stop it first"
    log "starting sge_$name (log: $STATE_DIR/$name.log)"
    # Foreground (SGE_ND=1) in a session of its own, no stdin, no inherited lock fd; setsid does not
    # fork here (we are no process group leader), so $! is the daemon itself. A clean environment: jobs
    # inherit the environment of sge_execd, which must not depend on who ran this script.
    (
        cd /
        # No inherited descriptors (a caller's pipe kept open by a daemon would block the caller).
        for fd in "/proc/$BASHPID/fd/"*; do
            fd=${fd##*/}
            ((fd > 2)) && eval "exec $fd>&-"
        done 2>/dev/null || true
        exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
            HOME=/root SGE_ND=1 setsid "/usr/sbin/sge_$name" </dev/null >>"$STATE_DIR/$name.log" 2>&1
    ) &
    pid=$!
    echo "$pid" >"$STATE_DIR/$name.pid"
    local i
    for i in $(seq 1 50); do
        [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "/usr/lib/gridengine/sge_$name" ]] && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    tail -n 20 "$STATE_DIR/$name.log" >&2 || true
    die "sge_$name did not start"
}

qmaster_answers() { timeout 20 qconf -sh >/dev/null 2>&1; }

wait_qmaster() {
    local i pid
    for i in $(seq 1 120); do
        qmaster_answers && return 0
        pid=$(pid_of qmaster) || { tail -n 20 "$STATE_DIR/qmaster.log" "$SPOOL/qmaster/messages" >&2 2>/dev/null || true; die "sge_qmaster exited"; }
        sleep 0.5
    done
    die "sge_qmaster does not answer after 60 s; see $SPOOL/qmaster/messages"
}

# descendants PID -> all processes below PID (shepherds and jobs of an execd).
descendants() {
    local kids k
    kids=$(pgrep -P "$1" || true)
    for k in $kids; do
        echo "$k"
        descendants "$k"
    done
}

stop_one() {
    local name=$1 pid extra=() i
    pid=$(pid_of "$name") || { rm -f "$STATE_DIR/$name.pid"; return 0; }
    [[ $name == execd ]] && mapfile -t extra < <(descendants "$pid")
    log "stopping sge_$name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 150); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "sge_$name did not exit after 30 s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
    # Shepherds and jobs the execd started survive it: end them too.
    if ((${#extra[@]})); then
        log "ending ${#extra[@]} job process(es) left by sge_execd"
        kill -KILL "${extra[@]}" 2>/dev/null || true
    fi
    rm -f "$STATE_DIR/$name.pid"
}

# ------------------------------------------------------------------------------------------- configure

# unfold: joins SGE's continuation lines ("value \" + indented rest) into one line each.
unfold() { sed -e ':a' -e '/\\$/N; s/[[:space:]]*\\\n[[:space:]]*/ /; ta'; }

# set_attrs KEY VALUE ... : reads an unfolded SGE configuration dump on stdin, prints it with those
# attributes set; keys not in the dump are appended.
set_attrs() {
    awk -v kv="$(printf '%s\037' "$@")" '
        BEGIN { n = split(kv, a, "\037"); for (i = 1; i + 1 <= n; i += 2) { want[a[i]] = a[i+1]; order[++m] = a[i] } }
        ($1 in want) { printf "%-26s %s\n", $1, want[$1]; seen[$1] = 1; next }
        { print }
        END { for (i = 1; i <= m; i++) if (!(order[i] in seen)) printf "%-26s %s\n", order[i], want[order[i]] }'
}

# Normalised, sorted "key value" lines of an unfolded dump, for comparing.
norm() { awk 'NF && $1 !~ /^#/ { k = $1; $1 = ""; sub(/^ +/, ""); print k, $0 }' | sort; }

# qc ARGS: qconf that is quiet unless it fails.
qc() {
    local out
    out=$(qconf "$@" 2>&1) || { printf '%s\n' "$out" >&2; die "qconf $* failed"; }
}

REPORTING_CHANGED=0
EXECD_CONF_CHANGED=0
TMP=""
tmpdir() { [[ -n $TMP ]] || { TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT; }; }

configure() {
    tmpdir
    local host cur new
    host=$(sge_host)

    # Global configuration: root may run jobs, accounting flushed every second, no mail.
    cur=$(qconf -sconf global | unfold)
    mkdir -p "$TMP/conf"
    # reporting_params: keep the other key=value settings, force accounting on and a 1 s flush.
    local reporting
    reporting=$(awk '$1 == "reporting_params" {
            n = split("accounting reporting flush_time joblog sharelog", k, " ")
            for (i = 1; i <= n; i++) known[k[i]] = 1
            v["reporting"] = "false"; v["joblog"] = "false"; v["sharelog"] = "00:00:00"
            for (i = 2; i <= NF; i++) if (split($i, kv, "=") == 2) { if (!(kv[1] in known)) { k[++n] = kv[1]; known[kv[1]] = 1 } v[kv[1]] = kv[2] }
            v["accounting"] = "true"; v["flush_time"] = "00:00:01"
            for (i = 1; i <= n; i++) printf "%s%s=%s", (i > 1 ? " " : ""), k[i], v[k[i]]
        }' <<<"$cur")
    # login_shells none: a job's shell (-S bash) is no login shell, so it does not read the submitting user's
    # ~/.profile and ~/.bashrc, as a Slurm or HTCondor job does not. (A ~/.bashrc with `pyenv init` runs `pyenv
    # rehash`, which takes a lock file; a job killed meanwhile (the cancel tests) left it behind, and every later
    # job of the suite waited 60 s for it.)
    new=$(grep -v '^#' <<<"$cur" | set_attrs min_uid 0 min_gid 0 administrator_mail none \
        reporting_params "$reporting" execd_params ENABLE_ADDGRP_KILL=TRUE login_shells none)
    if [[ $(norm <<<"$cur") != "$(norm <<<"$new")" ]]; then
        log "setting the global configuration"
        printf '%s\n' "$new" >"$TMP/conf/global"
        qc -Mconf "$TMP/conf/global"
        [[ $(awk '$1 == "reporting_params"' <<<"$cur") == *flush_time=00:00:01* ]] || REPORTING_CHANGED=1
        # sge_execd reads the global configuration again only on its next load report
        [[ $(awk '$1 == "login_shells" {print $2}' <<<"$cur") == none ]] || EXECD_CONF_CHANGED=1
    fi

    # Scheduler: a pass every second, no load adjustments, no per-job scheduling info.
    cur=$(qconf -ssconf | unfold)
    new=$(set_attrs schedule_interval 0:0:1 flush_submit_sec 1 flush_finish_sec 1 schedd_job_info false \
        job_load_adjustments NONE load_adjustment_decay_time 0:0:0 <<<"$cur")
    if [[ $(norm <<<"$cur") != "$(norm <<<"$new")" ]]; then
        log "setting the scheduler configuration"
        printf '%s\n' "$new" >"$TMP/sconf"
        qc -Msconf "$TMP/sconf"
    fi

    # This host: admin (qmaster's own host already is), submit and execution host.
    if ! qconf -ss 2>/dev/null | grep -qx "$host"; then
        log "adding submit host $host"
        qc -as "$host"
    fi
    if ! qconf -se "$host" >/dev/null 2>&1; then
        log "adding execution host $host"
        printf '%s\n' "hostname $host" "load_scaling NONE" "complex_values NONE" "user_lists NONE" \
            "xuser_lists NONE" "projects NONE" "xprojects NONE" "usage_scaling NONE" "report_variables NONE" \
            >"$TMP/exechost"
        qc -Ae "$TMP/exechost"
    fi

    # Parallel environment "smp": all slots of a job on one host (-pe smp N).
    # shellcheck disable=SC2016 # $pe_slots is SGE syntax
    local pe=("pe_name $PE" "slots 999" "user_lists NONE" "xuser_lists NONE" "start_proc_args NONE"
        "stop_proc_args NONE" 'allocation_rule $pe_slots' "control_slaves FALSE" "job_is_first_task TRUE"
        "urgency_slots min" "accounting_summary FALSE" "qsort_args NONE")
    printf '%s\n' "${pe[@]}" >"$TMP/pe"
    if ! cur=$(qconf -sp "$PE" 2>/dev/null); then
        log "adding parallel environment $PE"
        qc -Ap "$TMP/pe"
    elif [[ $(unfold <<<"$cur" | norm) != "$(norm <"$TMP/pe")" ]]; then
        log "updating parallel environment $PE"
        qc -Mp "$TMP/pe"
    fi

    # Queue all.q on this host.
    local qattrs=(hostlist "$host" load_thresholds NONE suspend_thresholds NONE pe_list "$PE" slots "$SLOTS"
        shell /bin/sh tmpdir /tmp h_rt INFINITY s_rt INFINITY h_vmem INFINITY s_vmem INFINITY
        initial_state default rerun FALSE)
    if ! cur=$(qconf -sq "$QUEUE" 2>/dev/null); then
        log "adding queue $QUEUE"
        queue_template | set_attrs "${qattrs[@]}" >"$TMP/$QUEUE"
        qc -Aq "$TMP/$QUEUE"
    else
        cur=$(unfold <<<"$cur")
        new=$(set_attrs "${qattrs[@]}" <<<"$cur")
        if [[ $(norm <<<"$cur") != "$(norm <<<"$new")" ]]; then
            log "updating queue $QUEUE"
            printf '%s\n' "$new" >"$TMP/$QUEUE"
            qc -Mq "$TMP/$QUEUE"
        fi
    fi
    # A queue instance left in error state (E) by an earlier failure, or disabled: clear and enable it.
    local st
    st=$(queue_state)
    if [[ $st == *E* ]]; then log "clearing error state of $QUEUE@$host"; qmod -cq "$QUEUE@$host" >/dev/null 2>&1 || true; fi
    if [[ $st == *d* ]]; then log "enabling $QUEUE@$host"; qmod -e "$QUEUE@$host" >/dev/null 2>&1 || true; fi
}

# SGE 8.1.9's defaults for a cluster queue.
queue_template() {
    cat <<EOF
qname                 $QUEUE
hostlist              NONE
seq_no                0
load_thresholds       np_load_avg=1.75
suspend_thresholds    NONE
nsuspend              1
suspend_interval      00:05:00
priority              0
min_cpu_interval      00:05:00
processors            UNDEFINED
qtype                 BATCH INTERACTIVE
ckpt_list             NONE
pe_list               make
rerun                 FALSE
slots                 1
tmpdir                /tmp
shell                 /bin/sh
prolog                NONE
epilog                NONE
shell_start_mode      posix_compliant
starter_method        NONE
suspend_method        NONE
resume_method         NONE
terminate_method      NONE
notify                00:00:60
owner_list            NONE
user_lists            NONE
xuser_lists           NONE
subordinate_list      NONE
complex_values        NONE
projects              NONE
xprojects             NONE
calendar              NONE
initial_state         default
s_rt                  INFINITY
h_rt                  INFINITY
s_cpu                 INFINITY
h_cpu                 INFINITY
s_fsize               INFINITY
h_fsize               INFINITY
s_data                INFINITY
h_data                INFINITY
s_stack               INFINITY
h_stack               INFINITY
s_core                INFINITY
h_core                INFINITY
s_rss                 INFINITY
h_rss                 INFINITY
s_vmem                INFINITY
h_vmem                INFINITY
EOF
}

# ---------------------------------------------------------------------------------------------- status

# The state letters of the queue instance all.q@host ("" when healthy; "missing" when there is none).
queue_state() {
    local host out
    host=$(sge_host 2>/dev/null) || { echo missing; return; }
    out=$(timeout 20 qstat -f -q "$QUEUE@$host" 2>/dev/null) || { echo missing; return; }
    awk -v q="$QUEUE@$host" '$1 == q { found = 1; print ($6 == "" ? "" : $6) } END { if (!found) print "missing" }' <<<"$out"
}

# 0 when the execution daemon answers (qmaster notices a dead execd only minutes later).
execd_answers() {
    local port
    port=$(getent services sge_execd | awk '{split($2, a, "/"); print a[1]}')
    timeout 10 qping -info "$(sge_host)" "${port:-6445}" execd 1 >/dev/null 2>&1
}

# 0 when jobs submitted now will run: qmaster and execd answer and the queue instance has no blocking
# state (u unknown/no execd, E error, d disabled, s/S/C suspended, D/c configuration problems, a/A alarm,
# o orphaned).
accepting() {
    [[ -s $COMMON/act_qmaster ]] || return 1
    qmaster_answers || return 1
    execd_answers || return 1
    local st
    st=$(queue_state)
    [[ $st != missing && ! $st =~ [uEdsSCDcaAo] ]]
}

wait_accepting() {
    local i st
    for i in $(seq 1 120); do
        accepting && return 0
        pid_of execd >/dev/null || { tail -n 20 "$STATE_DIR/execd.log" >&2 2>/dev/null || true; die "sge_execd exited"; }
        sleep 0.5
    done
    st=$(queue_state)
    die "queue $QUEUE@$(sge_host) not ready after 60 s (state '${st}'); see $SPOOL/qmaster/messages"
}

# -------------------------------------------------------------------------------------------- commands

cmd_start() {
    local t0=$SECONDS changed=0
    mkdir -p "$STATE_DIR"
    install_packages
    init_cell
    if fix_host_names; then changed=1; fi
    if ((changed)) && { pid_of qmaster >/dev/null || pid_of execd >/dev/null; }; then
        log "host aliases changed: restarting the daemons"
        stop_one execd
        stop_one qmaster
    fi
    local started=0
    if ! pid_of qmaster >/dev/null; then
        launch qmaster
        started=1
    fi
    wait_qmaster
    configure
    if ((REPORTING_CHANGED)); then
        # The running qmaster keeps flushing accounting on the old 15 s timer until it fires once.
        log "restarting sge_qmaster so that the 1 s accounting flush applies at once"
        stop_one qmaster
        launch qmaster
        wait_qmaster
        started=1
    fi
    if ((EXECD_CONF_CHANGED)) && pid_of execd >/dev/null; then
        log "restarting sge_execd so that the new global configuration applies at once"
        stop_one execd
    fi
    if ! pid_of execd >/dev/null; then
        launch execd
        started=1
    fi
    wait_accepting
    if ((started)); then
        log "SGE running on $(sge_host) (qmaster pid $(pid_of qmaster), execd pid $(pid_of execd)), ready in $((SECONDS - t0)) s"
    else
        log "SGE already running (qmaster pid $(pid_of qmaster), execd pid $(pid_of execd))"
    fi
}

cmd_stop() {
    mkdir -p "$STATE_DIR"
    if ! pid_of execd >/dev/null && ! pid_of qmaster >/dev/null; then
        log "no SGE daemon started by this script is running"
    else
        stop_one execd
        stop_one qmaster
        log "stopped"
    fi
    local others
    others=$(foreign_pids "$QMASTER_BIN")" "$(foreign_pids "$EXECD_BIN")
    [[ -z ${others// /} ]] || log "note: SGE daemons not started by this script are running (pid ${others}); left alone"
}

cmd_status() {
    local q e
    q=$(pid_of qmaster || echo none)
    e=$(pid_of execd || echo none)
    if accepting; then
        log "SGE accepts jobs (our qmaster pid $q, execd pid $e)"
        return 0
    fi
    log "SGE does not accept jobs (our qmaster pid $q, execd pid $e, queue state '$(queue_state 2>/dev/null)')"
    return 1
}

# One start/stop at a time (fd 8; the daemons do not inherit it).
lock_script() {
    mkdir -p "$STATE_DIR"
    exec 8>"$STATE_DIR/lock"
    flock -w 1800 8 || die "could not take $STATE_DIR/lock"
}

case ${1:-} in
    start) lock_script; cmd_start ;;
    stop) lock_script; cmd_stop ;;
    restart) lock_script; cmd_stop; cmd_start ;;
    status) cmd_status ;;
    *) echo "usage: $0 start|stop|restart|status" >&2; exit 2 ;;
esac
