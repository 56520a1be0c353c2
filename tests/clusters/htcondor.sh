#!/usr/bin/env bash
# A real personal HTCondor pool (HTCondor 25.14.0) on this machine, for b2batch's tests.
#
#   tests/clusters/htcondor.sh start    unpack the archive if needed, create the users, write the configuration,
#                                       start condor_master if not running, wait until a slot is usable (idempotent)
#   tests/clusters/htcondor.sh stop     stop exactly the master this script started (and its daemons and jobs)
#   tests/clusters/htcondor.sh restart  stop, then start
#   tests/clusters/htcondor.sh status   exit 0 when the pool takes jobs (schedd answers, a slot with CPUs)
#   tests/clusters/htcondor.sh env      print the environment lines (CONDOR_CONFIG, PATH) to use the pool
#
# The archive is built for Debian 12 x86_64 (../shared/htcondor/README.md of the checkout). Without it, `start`
# says so and exits 0: the tests on the real pool skip, naming the reason (tests/systems/htcondor_real/).
#
# HTCondor's own rules (not defects): its daemons run as user `condor` and its LOG/SPOOL/EXECUTE/... folders belong
# to it; it never runs a job owned by root, so the tests submit as the unprivileged user $TEST_USER (default
# b2test, created with a home). That user must reach this machine's Python: when the interpreter lives under
# /root (pyenv), /root gets an ACL entry giving that one user search (x) permission.
#
# Files: the release under $PREFIX/htcondor (default /opt/b2batch-htcondor), the configuration
# $PREFIX/condor_config, an environment file $PREFIX/env.sh; state under $STATE (default /var/lib/b2batch-htcondor:
# log/ spool/ execute/ lock/ run/ cred/, master.pid, master.out).
#
# Environment (optional): B2BATCH_HTCONDOR_ARCHIVE (the .tar.xz), B2BATCH_HTCONDOR_PREFIX, B2BATCH_HTCONDOR_STATE,
# B2BATCH_HTCONDOR_PORT (collector port, default 9718), B2BATCH_HTCONDOR_CPUS (default 2),
# B2BATCH_HTCONDOR_USER (default b2test).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# The archive: B2BATCH_HTCONDOR_ARCHIVE, else ../shared/htcondor beside the checkout, else this kind of machine's
# /work/shared/htcondor (a clone elsewhere, e.g. CI's, finds it there).
ARCHIVE=${B2BATCH_HTCONDOR_ARCHIVE:-$(ls "$HERE"/../../../shared/htcondor/htcondor-*-debian12-x86_64.tar.xz \
    /work/shared/htcondor/htcondor-*-debian12-x86_64.tar.xz 2>/dev/null | head -n1 || true)}
PREFIX=${B2BATCH_HTCONDOR_PREFIX:-/opt/b2batch-htcondor}
RELEASE=$PREFIX/htcondor
CONFIG=$PREFIX/condor_config
ENV_FILE=$PREFIX/env.sh
STATE=${B2BATCH_HTCONDOR_STATE:-/var/lib/b2batch-htcondor}
PORT=${B2BATCH_HTCONDOR_PORT:-9718}
CPUS=${B2BATCH_HTCONDOR_CPUS:-2}
TEST_USER=${B2BATCH_HTCONDOR_USER:-b2test}
MASTER=$RELEASE/sbin/condor_master
# The Python the tests run (the caller's, before PATH is reset below): the test user must be able to run it.
PYTHON=${B2BATCH_HTCONDOR_PYTHON:-$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null || true)}
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

log() { printf 'htcondor.sh: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ------------------------------------------------------------------------------------------------ install

unpack() {
    local stamp=$PREFIX/.unpacked-from
    if [[ -x $MASTER && -f $stamp && $(<"$stamp") == "$(basename "$ARCHIVE")" ]]; then return 0; fi
    log "unpacking $ARCHIVE into $PREFIX"
    mkdir -p "$PREFIX"
    rm -rf "$RELEASE"
    tar -xJf "$ARCHIVE" -C "$PREFIX"
    [[ -x $MASTER ]] || die "the archive has no htcondor/sbin/condor_master"
    basename "$ARCHIVE" >"$stamp"
}

apt_install() {
    local i
    # One lock shared with the other cluster scripts around apt (tests/clusters/slurm.sh, sge.sh).
    exec 9>/var/lock/b2batch-policy-rc.lock
    flock -w 1800 9 || die "could not take /var/lock/b2batch-policy-rc.lock"
    for i in 1 2 3; do
        if apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=900 "$@" \
            </dev/null >"$STATE/apt-install.log" 2>&1; then
            flock -u 9; exec 9>&-; return 0
        fi
        log "apt-get install $* failed (try $i); updating the package lists"
        apt-get -q -o DPkg::Lock::Timeout=900 update </dev/null >"$STATE/apt-update.log" 2>&1 || sleep 10
    done
    tail -n 20 "$STATE/apt-install.log" >&2
    die "apt-get install $* failed; see $STATE/apt-install.log"
}

install_libraries() {
    local missing=()
    # Besides glibc the binaries need these; all but libgomp1 are on a fresh Debian 12.
    dpkg -s libgomp1 >/dev/null 2>&1 || missing+=(libgomp1)
    command -v setfacl >/dev/null || missing+=(acl)
    ((${#missing[@]} == 0)) || { log "installing ${missing[*]}"; apt_install "${missing[@]}"; }
    local lacking
    lacking=$(LD_LIBRARY_PATH= ldd "$MASTER" | awk '/not found/ {print $1}')
    [[ -z $lacking ]] || die "condor_master lacks the libraries: $lacking"
}

users() {
    id condor >/dev/null 2>&1 || { log "creating the system user condor"; useradd --system --no-create-home \
        --shell /usr/sbin/nologin condor; }
    id "$TEST_USER" >/dev/null 2>&1 || { log "creating the unprivileged test user $TEST_USER"; useradd \
        --create-home --shell /bin/bash "$TEST_USER"; }
    # The test user runs this machine's Python (and the jobs do, as that user): let it through /root when the
    # interpreter lives there, and nothing more (search permission, no listing).
    local python
    python=$(readlink -f "$PYTHON" 2>/dev/null || true)
    if [[ $python == /root/* ]] && ! runuser -u "$TEST_USER" -- test -x "$python"; then
        log "giving $TEST_USER search permission on /root (the Python $python lives there)"
        setfacl -m "u:$TEST_USER:x" /root
    fi
}

# -------------------------------------------------------------------------------------------- configure

write_config() {
    local d
    for d in log spool execute lock run cred; do
        mkdir -p "$STATE/$d"
        chown condor:condor "$STATE/$d"
    done
    chmod 755 "$STATE" "$STATE/execute"
    chmod 700 "$STATE/cred"
    local new
    new=$(cat <<EOF
# Written by tests/clusters/htcondor.sh: a personal pool on 127.0.0.1 with fast intervals, for tests.
RELEASE_DIR = $RELEASE
LOCAL_DIR = $STATE
BIN = \$(RELEASE_DIR)/bin
SBIN = \$(RELEASE_DIR)/sbin
LIB = \$(RELEASE_DIR)/lib
LIBEXEC = \$(RELEASE_DIR)/libexec
LOG = \$(LOCAL_DIR)/log
SPOOL = \$(LOCAL_DIR)/spool
EXECUTE = \$(LOCAL_DIR)/execute
LOCK = \$(LOCAL_DIR)/lock
RUN = \$(LOCAL_DIR)/run
SEC_CREDENTIAL_DIRECTORY = \$(LOCAL_DIR)/cred
CONDOR_HOST = 127.0.0.1
NETWORK_INTERFACE = 127.0.0.1
COLLECTOR_HOST = 127.0.0.1:$PORT
DAEMON_LIST = MASTER, COLLECTOR, NEGOTIATOR, SCHEDD, STARTD
USE_SHARED_PORT = False
MAIL = /bin/true
UID_DOMAIN = localdomain
FILESYSTEM_DOMAIN = localdomain
TRUST_UID_DOMAIN = True
SEC_DEFAULT_AUTHENTICATION_METHODS = FS
SEC_CLIENT_AUTHENTICATION_METHODS = FS
ALLOW_READ = *
ALLOW_WRITE = *
ALLOW_ADMINISTRATOR = *
ALLOW_NEGOTIATOR = *
ALLOW_DAEMON = *
ALLOW_OWNER = *
ALLOW_CONFIG = *
START = TRUE
SUSPEND = FALSE
PREEMPT = FALSE
KILL = FALSE
NUM_CPUS = $CPUS
NUM_SLOTS_TYPE_1 = 1
SLOT_TYPE_1 = 100%
SLOT_TYPE_1_PARTITIONABLE = TRUE
DISK = 20000000
STARTD_DETECT_GPUS =
MACHINE_RESOURCE_INVENTORY_GPUs =
HIBERNATION_PLUGIN = /bin/true
NEGOTIATOR_INTERVAL = 2
NEGOTIATOR_CYCLE_DELAY = 1
SCHEDD_INTERVAL = 5
UPDATE_INTERVAL = 5
STARTER_UPDATE_INTERVAL = 2
SHADOW_QUEUE_UPDATE_INTERVAL = 2
SCHEDD_MIN_INTERVAL = 0
JOB_START_DELAY = 0
# Jobs see the machine's /tmp (HTCondor's default mounts a private /tmp and /var/tmp from the scratch folder, where
# a job finds no folder of the tests' tmp_path).
MOUNT_UNDER_SCRATCH =
# Jobs leave the queue at once; condor_history has them.
HISTORY = \$(SPOOL)/history
# A memory policy HTCondor enforces without cgroups: a job whose resident memory exceeds its request_memory is
# held (checked every 5 s), with a reason that names memory.
PERIODIC_EXPR_INTERVAL = 5
SYSTEM_PERIODIC_HOLD = JobStatus == 2 && MemoryUsage =!= undefined && RequestMemory =!= undefined && MemoryUsage > RequestMemory
SYSTEM_PERIODIC_HOLD_REASON = strcat("Job exceeded its memory request: ", MemoryUsage, " MB used, ", RequestMemory, " MB requested")
EOF
)
    if [[ ! -f $CONFIG || $(<"$CONFIG") != "$new" ]]; then
        log "writing $CONFIG"
        printf '%s\n' "$new" >"$CONFIG"
        chmod 644 "$CONFIG"
        CONFIG_CHANGED=1
    fi
    printf '%s\n' "export CONDOR_CONFIG=$CONFIG" "export PATH=$RELEASE/bin:$RELEASE/sbin:\$PATH" >"$ENV_FILE"
    chmod 644 "$ENV_FILE"
}

# ------------------------------------------------------------------------------------------------ daemons

condor() { env -i PATH="$RELEASE/bin:$RELEASE/sbin:/usr/bin:/bin" CONDOR_CONFIG="$CONFIG" "$@"; }

master_pid() {
    local pid
    [[ -s $STATE/master.pid ]] || return 1
    pid=$(<"$STATE/master.pid")
    [[ $pid =~ ^[0-9]+$ && $(readlink "/proc/$pid/exe" 2>/dev/null) == "$MASTER" ]] || return 1
    echo "$pid"
}

launch() {
    log "starting condor_master (log: $STATE/log/MasterLog)"
    # Foreground (-f) in a session of its own, no stdin, no inherited descriptors, a clean environment (jobs must
    # not depend on who ran this script); $! is the master itself.
    (
        cd /
        for fd in "/proc/$BASHPID/fd/"*; do
            fd=${fd##*/}
            ((fd > 2)) && eval "exec $fd>&-"
        done 2>/dev/null || true
        exec env -i PATH="$RELEASE/bin:$RELEASE/sbin:/usr/bin:/bin" LANG=C.UTF-8 CONDOR_CONFIG="$CONFIG" \
            setsid "$MASTER" -f </dev/null >>"$STATE/master.out" 2>&1
    ) &
    echo $! >"$STATE/master.pid"
}

# 0 when the schedd answers and the startd advertises its CPUs (TotalCpus: busy slots count too).
usable() {
    timeout 20 env -i PATH="$RELEASE/bin:/usr/bin:/bin" CONDOR_CONFIG="$CONFIG" condor_q -totals >/dev/null 2>&1 \
        || return 1
    local cpus
    cpus=$(timeout 20 env -i PATH="$RELEASE/bin:/usr/bin:/bin" CONDOR_CONFIG="$CONFIG" \
        condor_status -af TotalCpus 2>/dev/null | awk '$1 > 0 {n += $1} END {print n + 0}')
    ((cpus > 0))
}

wait_usable() {
    local i
    for i in $(seq 1 120); do
        usable && return 0
        master_pid >/dev/null || { tail -n 20 "$STATE/master.out" "$STATE/log/MasterLog" >&2 2>/dev/null || true
            die "condor_master exited"; }
        sleep 0.5
    done
    die "no usable slot after 60 s; see $STATE/log/StartLog and $STATE/log/MasterLog"
}

stop_master() {
    local pid i
    pid=$(master_pid) || { rm -f "$STATE/master.pid"; return 0; }
    log "stopping condor_master (pid $pid) and its daemons"
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 300); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "condor_master did not exit after 30 s: SIGQUIT"
        kill -QUIT "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
    rm -f "$STATE/master.pid"
}

# Daemons of this release still running (a master killed without its children).
leftovers() {
    local p out=()
    for p in $(pgrep '^condor_' || true); do
        [[ $(readlink "/proc/$p/exe" 2>/dev/null) == "$RELEASE"/* ]] && out+=("$p")
    done
    echo "${out[*]}"
}

# ------------------------------------------------------------------------------------------------ commands

usage_lines() {
    log "use it: export CONDOR_CONFIG=$CONFIG PATH=$RELEASE/bin:$RELEASE/sbin:\$PATH (or . $ENV_FILE);"
    log "submit as $TEST_USER (HTCondor never runs a job owned by root): runuser -u $TEST_USER -- env CONDOR_CONFIG=... condor_submit ..."
}

no_archive() {
    [[ -n $ARCHIVE && -f $ARCHIVE ]] && return 1
    log "no HTCondor archive (looked for ../shared/htcondor/htcondor-*-debian12-x86_64.tar.xz beside the checkout" \
        "and in /work/shared/htcondor, or B2BATCH_HTCONDOR_ARCHIVE): the tests on a real HTCondor are skipped; the emulator tests still run"
    return 0
}

CONFIG_CHANGED=0
cmd_start() {
    local t0=$SECONDS
    [[ $(id -u) == 0 ]] || die "must run as root"
    no_archive && exit 0
    mkdir -p "$STATE"
    unpack
    install_libraries
    users
    write_config
    if ((CONFIG_CHANGED)) && master_pid >/dev/null; then
        log "the configuration changed: restarting"
        stop_master
    fi
    local started=0
    if ! master_pid >/dev/null; then
        local others
        others=$(leftovers)
        [[ -z $others ]] || die "HTCondor daemons not started by this script are running (pid $others); stop them first"
        launch
        started=1
    fi
    wait_usable
    if ((started)); then
        log "HTCondor running (master pid $(master_pid)), ready in $((SECONDS - t0)) s"
    else
        log "HTCondor already running (master pid $(master_pid))"
    fi
    usage_lines
}

cmd_stop() {
    [[ $(id -u) == 0 ]] || die "must run as root"
    mkdir -p "$STATE"
    if master_pid >/dev/null; then stop_master; log "stopped"; else log "no condor_master started by this script is running"; fi
    local others
    others=$(leftovers)
    [[ -z $others ]] || log "note: HTCondor processes still running (pid $others)"
}

cmd_status() {
    if no_archive; then return 1; fi
    if master_pid >/dev/null && usable; then
        log "HTCondor takes jobs (master pid $(master_pid))"
        usage_lines
        return 0
    fi
    log "HTCondor does not take jobs (master pid $(master_pid || echo none))"
    return 1
}

lock_script() {
    mkdir -p "$STATE"
    exec 8>"$STATE/script.lock"
    flock -w 1800 8 || die "could not take $STATE/script.lock"
}

case ${1:-} in
    start) lock_script; cmd_start ;;
    stop) lock_script; cmd_stop ;;
    restart) lock_script; cmd_stop; cmd_start ;;
    status) cmd_status ;;
    env) cat "$ENV_FILE" ;;
    *) echo "usage: $0 start|stop|restart|status|env" >&2; exit 2 ;;
esac
