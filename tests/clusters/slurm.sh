#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine, for b2batch's tests.
#
# Debian 12 (Slurm 22.05 from Debian's packages), run as root, no systemd: the daemons
# (munged, slurmctld, slurmd) run in the foreground mode, detached with setsid, and their
# PIDs are kept in pid files so that `stop` ends exactly what `start` started.
#
# Usage: tests/clusters/slurm.sh SUBCOMMAND
#   start          install if needed, configure, start what is not running, then run one
#                  probe job (job name b2batch-slurm-probe) to the end; idempotent and fast
#                  when all runs; restarts slurmctld and slurmd if slurm.conf changed.
#                  Accounting: MariaDB (mariadbd, socket only, no TCP port) and slurmdbd
#                  start before slurmctld, so sacct shows finished jobs with Elapsed,
#                  TotalCPU and MaxRSS (jobacct_gather/linux samples every second)
#   stop           cancel all jobs, stop slurmd, the job steps, slurmctld, slurmdbd,
#                  mariadbd (and munged if this script started it); the next start begins
#                  with an empty queue (the accounting database is kept)
#   restart        stop, then start
#   status         exit 0 if the cluster accepts jobs (prints a one-line summary)
#   stop-slurmd    stop only slurmd (fault tests): running jobs go on (slurmstepd outlives
#                  slurmd); after SlurmdTimeout (60 s) the node is DOWN and its jobs end as
#                  NODE_FAIL (and are requeued: Requeue=1 is Slurm's default)
#   start-slurmd   start only slurmd again and wait until the node is usable
#   restart-slurmd stop-slurmd, then start-slurmd
#   install        only install the packages
#   config         only (re)write the configuration files
#
# Files: configuration /etc/slurm/slurm.conf; everything else under $B2BATCH_SLURM_DIR
# (default /var/lib/b2batch-slurm): run/ (pid files), log/ (daemon logs), ctld/ (slurmctld
# state), slurmd/ (slurmd spool), jobcomp.txt (one line per finished job), dbd.pass (the
# database password of slurmdbd); /etc/slurm/slurmdbd.conf (mode 600); the database in
# MariaDB's own /var/lib/mysql.
#
# Environment: B2BATCH_SLURM_DIR, B2BATCH_SLURM_CPUS (CPUs the node advertises, default 8),
# B2BATCH_SLURM_MEMORY (MB the node advertises, default 16000).
set -euo pipefail

BASE=${B2BATCH_SLURM_DIR:-/var/lib/b2batch-slurm}
RUN=$BASE/run
LOGS=$BASE/log
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
NODE_CPUS=${B2BATCH_SLURM_CPUS:-8}
NODE_MEMORY=${B2BATCH_SLURM_MEMORY:-16000}
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)
DBD_CONF=$CONF_DIR/slurmdbd.conf
DB_SOCKET=/run/mysqld/mysqld.sock
MUNGE_SOCKET=/run/munge/munge.socket.2
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

log() { echo "slurm.sh: $*" >&2; }
die() { echo "slurm.sh: ERROR: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root"
HOST=$(hostname -s)
[[ -n $HOST ]] || die "hostname -s is empty"

# ---------------------------------------------------------------- pid files
# pid_alive NAME COMM: print the PID from $RUN/NAME.pid if that process lives and is COMM.
pid_alive() {
    local f=$RUN/$1.pid pid
    [[ -s $f ]] || return 1
    pid=$(<"$f")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ -r /proc/$pid/comm && $(<"/proc/$pid/comm") == "$2" ]] 2>/dev/null || return 1
    proc_running "$pid" || return 1
    echo "$pid"
}

# proc_running PID: the process exists and is no zombie, whatever its name (right after
# spawn it may still be setsid/setpriv before they exec the daemon). A zombie (init may not
# reap it at once) is dead; but a daemon whose main thread has exited while its other
# threads still shut down shows Z for the main thread only: so look at every thread.
proc_running() {
    local t st
    for t in /proc/"$1"/task/*/stat; do
        st=$(sed 's/^.*) //' "$t" 2>/dev/null | cut -d' ' -f1) || continue
        [[ -n $st && $st != Z && $st != X ]] && return 0
    done
    return 1
}

# spawn NAME LOGFILE CMD...: start CMD in a new session, in the background, record its PID.
spawn() {
    local name=$1 logfile=$2 pid
    shift 2
    # fd 9 is our lock: the daemon must not keep it. The daemons (and so the job steps) do
    # not keep the caller's working directory either.
    (cd "$LOGS" && exec setsid "$@" </dev/null >>"$logfile" 2>&1 8>&- 9>&-) &
    pid=$!
    echo "$pid" >"$RUN/$name.pid"
    SPAWNED=$pid
}

# stop_pid NAME COMM: TERM the recorded process, wait for it to exit, KILL after a while.
stop_pid() {
    local name=$1 comm=$2 pid i
    if pid=$(pid_alive "$name" "$comm"); then
        log "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 150; i++)); do
            pid_alive "$name" "$comm" >/dev/null || break
            sleep 0.2
        done
        if pid_alive "$name" "$comm" >/dev/null; then
            log "$name did not exit after 30 s: killing it"
            kill -KILL "$pid" 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do
                pid_alive "$name" "$comm" >/dev/null || break
                sleep 0.2
            done
        fi
    fi
    rm -f "$RUN/$name.pid"
}

# ---------------------------------------------------------------- install
have_packages() {
    local b
    for b in slurmctld slurmd sbatch munged slurmdbd mariadbd mariadb; do
        command -v "$b" >/dev/null 2>&1 || return 1
    done
}

POLICY_CREATED=0
cleanup_policy() {
    if [[ $POLICY_CREATED == 1 ]] && grep -q b2batch-slurm /usr/sbin/policy-rc.d 2>/dev/null; then
        rm -f /usr/sbin/policy-rc.d
    fi
    POLICY_CREATED=0
}

do_install() {
    have_packages && return 0
    local t0=$SECONDS i
    log "installing ${PACKAGES[*]}"
    # One lock shared with the other cluster scripts (tests/clusters/sge.sh) around policy-rc.d and apt: the
    # file is written only when absent and removed only when this script wrote it. fd 9 is our own lock.
    exec 8>/var/lock/b2batch-policy-rc.lock
    flock -w 1800 8 || die "could not take /var/lock/b2batch-policy-rc.lock"
    # Keep the packages' scripts from starting services (there is no init system here).
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\n# temporary, made by b2batch-slurm (tests/clusters/slurm.sh)\nexit 101\n' \
            >/usr/sbin/policy-rc.d
        chmod 0755 /usr/sbin/policy-rc.d
        POLICY_CREATED=1
        trap cleanup_policy EXIT
        trap 'exit 130' INT TERM HUP
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Another engineer's script may run apt at the same time: retry while the lists lock is busy.
    for ((i = 1; ; i++)); do
        if apt-get -q -o DPkg::Lock::Timeout=900 update >"$LOGS/apt-update.log" 2>&1; then
            break
        fi
        ((i < 10)) || { cat "$LOGS/apt-update.log" >&2; die "apt-get update failed"; }
        log "apt-get update failed (try $i), retrying in 10 s"
        sleep 10
    done
    for ((i = 1; ; i++)); do
        if apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=900 \
            "${PACKAGES[@]}" >"$LOGS/apt-install.log" 2>&1; then
            break
        fi
        ((i < 3)) || { tail -n 30 "$LOGS/apt-install.log" >&2; die "apt-get install failed"; }
        log "apt-get install failed (try $i), retrying in 10 s"
        sleep 10
    done
    cleanup_policy
    flock -u 8
    exec 8>&-
    have_packages || die "packages installed but slurmctld/slurmd/sbatch/munged not found"
    log "installed in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------- configuration
render_conf() {
    cat <<EOF
# Written by tests/clusters/slurm.sh (b2batch): a single-node test cluster. Do not edit:
# the script rewrites it (and restarts the daemons) when it differs.
ClusterName=b2batch
SlurmctldHost=${HOST}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=${BASE}/ctld
SlurmdSpoolDir=${BASE}/slurmd
SlurmctldPidFile=${RUN}/slurmctld.self.pid
SlurmdPidFile=${RUN}/slurmd.self.pid
SlurmctldLogFile=${LOGS}/slurmctld.log
SlurmdLogFile=${LOGS}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups here.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# Accounting (sacct) through slurmdbd; jobacct_gather/linux reads /proc (no cgroups needed) every
# second, so even short jobs get MaxRSS and TotalCPU.
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
# A job over its --mem is killed at the next sample (no cgroups here, so no ConstrainRAMSpace): Slurm 22.05
# ends it FAILED, signal 9, with "exceeded memory limit" in its log, which b2batch reads as out of memory;
# memory escalation is tested against it (docs/policies.md).
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
JobCompType=jobcomp/filetxt
JobCompLoc=${BASE}/jobcomp.txt
# Scheduling: CPUs and memory are consumable, so --cpus-per-task and --mem are honoured.
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
# Jobs without --mem get 2000 MB per CPU (8 CPUs x 2000 = RealMemory): enough for any test job, which
# OverMemoryKill would otherwise kill at a small default.
DefMemPerCPU=2000
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,default_queue_depth=1000,bf_interval=5
# The node advertises more CPUs than the machine has, so many tiny jobs run at once.
SlurmdParameters=config_overrides
ReturnToService=2
MaxArraySize=100001
MaxJobCount=200000
# Finished jobs stay visible to squeue/scontrol this long (s).
MinJobAge=600
KillWait=5
OverTimeLimit=0
InactiveLimit=0
SlurmdTimeout=60
NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=${NODE_CPUS} RealMemory=${NODE_MEMORY} State=UNKNOWN
PartitionName=debug Nodes=${HOST} Default=YES MaxTime=INFINITE State=UP
EOF
}

conf_sha() { render_conf | sha256sum | cut -d' ' -f1; }

do_config() {
    mkdir -p "$RUN" "$LOGS" "$BASE/ctld" "$BASE/slurmd" "$CONF_DIR"
    local new
    new=$(render_conf)
    if [[ ! -f $CONF ]] || [[ $(<"$CONF") != "$new" ]]; then
        log "writing $CONF"
        printf '%s\n' "$new" >"$CONF.tmp.$$"
        chmod 0644 "$CONF.tmp.$$"
        mv -f "$CONF.tmp.$$" "$CONF"
    fi
    new=$(render_dbd_conf)
    if [[ ! -f $DBD_CONF ]] || [[ $(<"$DBD_CONF") != "$new" ]]; then
        log "writing $DBD_CONF"
        (umask 077 && printf '%s\n' "$new" >"$DBD_CONF.tmp.$$")
        mv -f "$DBD_CONF.tmp.$$" "$DBD_CONF"
        stop_pid slurmdbd slurmdbd # it reads its configuration at start only
    fi
    chmod 0600 "$DBD_CONF"
    touch "$BASE/jobcomp.txt"
}

# ---------------------------------------------------------------- accounting (MariaDB + slurmdbd)
db_password() {
    local f=$BASE/dbd.pass
    if [[ ! -s $f ]]; then
        (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$f.tmp.$$" && mv -f "$f.tmp.$$" "$f")
    fi
    chmod 0600 "$f"
    cat "$f"
}

render_dbd_conf() {
    cat <<EOF
# Written by tests/clusters/slurm.sh (b2batch): slurmdbd of the single-node test cluster.
AuthType=auth/munge
DbdHost=${HOST}
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
DebugLevel=info
LogFile=${LOGS}/slurmdbd.log
PidFile=${RUN}/slurmdbd.self.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$(db_password)
StorageLoc=slurm_acct_db
EOF
}

db_ok() { mariadb-admin --socket="$DB_SOCKET" ping >/dev/null 2>&1; }

start_mariadb() {
    local i
    if pid_alive mariadbd mariadbd >/dev/null; then
        db_ok && return 0
    elif db_ok; then
        return 0 # a MariaDB this script did not start serves us; leave it alone
    fi
    install -d -o mysql -g mysql -m 0755 /run/mysqld
    if [[ ! -d /var/lib/mysql/mysql ]]; then
        log "initialising the MariaDB data folder /var/lib/mysql"
        mariadb-install-db --user=mysql --datadir=/var/lib/mysql >"$LOGS/mariadb-install.log" 2>&1 ||
            { tail -n 20 "$LOGS/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
    fi
    log "starting mariadbd"
    spawn mariadbd "$LOGS/mariadbd.log" mariadbd --user=mysql --datadir=/var/lib/mysql \
        --socket="$DB_SOCKET" --skip-networking --pid-file=/run/mysqld/mariadbd.pid
    for ((i = 0; i < 600; i++)); do
        db_ok && return 0
        proc_running "$SPAWNED" || break
        sleep 0.1
    done
    tail -n 20 "$LOGS/mariadbd.log" >&2 || true
    die "mariadbd did not start (log: $LOGS/mariadbd.log)"
}

# db_setup: slurmdbd's database user and its grant (idempotent; root logs in through the socket).
db_setup() {
    local pw
    pw=$(db_password)
    mariadb --socket="$DB_SOCKET" -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '${pw}';
        ALTER USER 'slurm'@'localhost' IDENTIFIED BY '${pw}';
        CREATE DATABASE IF NOT EXISTS slurm_acct_db;
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;" ||
        die "could not create slurmdbd's database user in MariaDB"
}

dbd_ok() { sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1; }

start_slurmdbd() {
    local i
    if pid_alive slurmdbd slurmdbd >/dev/null && dbd_ok; then
        return 0
    fi
    stop_pid slurmdbd slurmdbd
    [[ -z $(foreign_daemons slurmdbd) ]] || die "a slurmdbd this script did not start runs: stop it first"
    db_setup
    log "starting slurmdbd"
    spawn slurmdbd "$LOGS/slurmdbd.out" slurmdbd -D
    for ((i = 0; i < 300; i++)); do
        dbd_ok && return 0
        proc_running "$SPAWNED" || break
        sleep 0.1
    done
    tail -n 20 "$LOGS/slurmdbd.log" "$LOGS/slurmdbd.out" >&2 || true
    die "slurmdbd did not come up (logs: $LOGS/slurmdbd.log, $LOGS/slurmdbd.out)"
}

# register_cluster: the cluster, an account and root in it, so that jobs are recorded (idempotent).
register_cluster() {
    if ! sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx b2batch; then
        log "registering cluster b2batch with slurmdbd"
        sacctmgr -i add cluster b2batch >/dev/null || die "sacctmgr add cluster failed"
    fi
    if ! sacctmgr -n -P list account format=account 2>/dev/null | grep -qx b2batch; then
        sacctmgr -i add account b2batch cluster=b2batch >/dev/null || die "sacctmgr add account failed"
    fi
    if ! sacctmgr -n -P list user format=user,defaultaccount 2>/dev/null | grep -qx 'root|b2batch'; then
        sacctmgr -i add user root account=b2batch defaultaccount=b2batch >/dev/null 2>&1 || true
        sacctmgr -i modify user root set defaultaccount=b2batch >/dev/null 2>&1 || true
    fi
}

# ---------------------------------------------------------------- munge
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

munge_setup() {
    id munge >/dev/null 2>&1 || die "user munge missing (is the munge package installed?)"
    install -d -o munge -g munge -m 0700 /etc/munge
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        log "creating /etc/munge/munge.key"
        head -c 1024 /dev/urandom >/etc/munge/munge.key.tmp.$$
        mv -f /etc/munge/munge.key.tmp.$$ /etc/munge/munge.key
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
}

start_munge() {
    local i
    if pid_alive munged munged >/dev/null; then
        munge_ok && return 0
        log "our munged runs but does not answer: restarting it"
        stop_pid munged munged
    elif munge_ok; then
        return 0 # a munged that this script did not start serves us; leave it alone
    fi
    munge_setup
    # A munged that died leaves its socket and pid file behind.
    rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock" /run/munge/munged.pid
    log "starting munged"
    spawn munged "$LOGS/munged.log" \
        setpriv --reuid=munge --regid=munge --init-groups munged --foreground
    for ((i = 0; i < 100; i++)); do
        munge_ok && return 0
        proc_running "$SPAWNED" || break
        sleep 0.1
    done
    tail -n 20 "$LOGS/munged.log" >&2 || true
    die "munged did not start (log: $LOGS/munged.log)"
}

# ---------------------------------------------------------------- slurm daemons
ctld_up() { scontrol ping 2>/dev/null | grep -q 'is UP'; }

# node_state: the node's state as sinfo prints it (e.g. idle, mixed, down*, drained).
node_state() { sinfo -h -N -n "$HOST" -o '%T' 2>/dev/null | head -n1; }

node_usable() {
    case "$(node_state)" in
        idle | mixed | allocated | completing) return 0 ;;
        *) return 1 ;;
    esac
}

foreign_daemons() {
    # Daemons of this name that this script did not start would hold our ports.
    local name=$1 ours=${2:-} p
    for p in $(pgrep -x "$name" 2>/dev/null || true); do
        [[ $p != "$ours" ]] && proc_running "$p" && echo "$p"
    done
    return 0
}

start_ctld() {
    local i pid others
    if pid=$(pid_alive slurmctld slurmctld); then
        return 0
    fi
    others=$(foreign_daemons slurmctld)
    [[ -z $others ]] || die "a slurmctld this script did not start runs (pid $others): stop it first"
    log "starting slurmctld"
    spawn slurmctld "$LOGS/slurmctld.out" slurmctld -D
    for ((i = 0; i < 300; i++)); do
        ctld_up && return 0
        proc_running "$SPAWNED" || break
        sleep 0.1
    done
    tail -n 20 "$LOGS/slurmctld.log" "$LOGS/slurmctld.out" >&2 || true
    die "slurmctld did not come up (logs: $LOGS/slurmctld.log, $LOGS/slurmctld.out)"
}

start_slurmd() {
    local i pid others
    if ! pid=$(pid_alive slurmd slurmd); then
        others=$(foreign_daemons slurmd)
        [[ -z $others ]] || die "a slurmd this script did not start runs (pid $others): stop it first"
        log "starting slurmd"
        spawn slurmd "$LOGS/slurmd.out" slurmd -D
    fi
    wait_node
}

# wait_node: wait until the node takes jobs; resume it if it is down or drained.
wait_node() {
    local i st resumed=0
    for ((i = 0; i < 600; i++)); do
        if ((i > 10)); then pid_alive slurmd slurmd >/dev/null || break; fi
        st=$(node_state)
        case "$st" in
            idle | mixed | allocated | completing) return 0 ;;
            down* | drain* | fail*)
                # ReturnToService=2 brings a registered node back; an old drain needs a resume.
                if ((resumed < 3)) && ((i % 20 == 10)); then
                    log "node $HOST is $st: resuming it"
                    scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true
                    resumed=$((resumed + 1))
                fi
                ;;
        esac
        sleep 0.1
    done
    sinfo -N -l >&2 || true
    tail -n 20 "$LOGS/slurmd.log" "$LOGS/slurmd.out" >&2 || true
    die "node $HOST did not become idle (state: ${st:-?}; logs: $LOGS/slurmd.log)"
}

stop_slurmd() { stop_pid slurmd slurmd; }

# Job steps (slurmstepd and the job's processes) outlive slurmd by design (so stop-slurmd
# keeps jobs running, as on a real cluster). A full stop ends them too: ours are the
# slurmstepd processes that hold our slurmd log open; they and all their descendants go.
descendants() {
    local p
    for p in $(pgrep -P "$1" 2>/dev/null || true); do
        echo "$p"
        descendants "$p"
    done
}

kill_job_steps() {
    local p fd kids all=()
    for p in $(pgrep -x slurmstepd 2>/dev/null || true); do
        for fd in /proc/"$p"/fd/*; do
            if [[ $(readlink "$fd" 2>/dev/null) == "$LOGS/slurmd.log" ]]; then
                mapfile -t kids < <(descendants "$p")
                all+=("$p" "${kids[@]}")
                break
            fi
        done
    done
    ((${#all[@]})) || return 0
    log "killing ${#all[@]} job step process(es) left by slurmd"
    kill -KILL "${all[@]}" 2>/dev/null || true
}

# ---------------------------------------------------------------- subcommands
LOCK_HELD=0
take_lock() {
    ((LOCK_HELD)) && return 0
    mkdir -p "$RUN" "$LOGS"
    exec 9>"$BASE/lock"
    flock -w 900 9 || die "could not take $BASE/lock"
    LOCK_HELD=1
}

cmd_start() {
    local t0=$SECONDS sha_file=$RUN/config.sha
    take_lock
    do_install
    do_config
    start_munge
    start_mariadb
    start_slurmdbd
    register_cluster
    if { pid_alive slurmctld slurmctld >/dev/null || pid_alive slurmd slurmd >/dev/null; } &&
        [[ $(cat "$sha_file" 2>/dev/null || true) != "$(conf_sha)" ]]; then
        log "slurm.conf changed: restarting slurmctld and slurmd"
        stop_slurmd
        stop_pid slurmctld slurmctld
    fi
    if pid_alive slurmctld slurmctld >/dev/null && pid_alive slurmd slurmd >/dev/null &&
        node_usable; then
        log "slurm already running on $HOST (state $(node_state))"
        return 0
    fi
    if ! pid_alive slurmctld slurmctld >/dev/null && ! pid_alive slurmd slurmd >/dev/null &&
        [[ -s $BASE/hostname && $(<"$BASE/hostname") != "$HOST" ]]; then
        # The saved state names another node: start from a clean state.
        log "host name changed ($(<"$BASE/hostname") -> $HOST): clearing the saved Slurm state"
        rm -rf "${BASE:?}/ctld" "${BASE:?}/slurmd"
        mkdir -p "$BASE/ctld" "$BASE/slurmd"
    fi
    echo "$HOST" >"$BASE/hostname"
    start_ctld
    conf_sha >"$sha_file"
    start_slurmd
    probe_job
    log "slurm running on $HOST (node $(node_state), partition debug) in $((SECONDS - t0)) s"
}

# probe_job: run one trivial job to the end. A fresh slurmctld starts scheduling only a few
# seconds after it starts; once the probe is done, the cluster runs jobs at once.
probe_job() {
    local id i st=""
    id=$(sbatch --parsable --job-name=b2batch-slurm-probe --output=/dev/null --chdir=/ \
        --wrap true 2>&1) || die "sbatch of the probe job failed: $id"
    id=${id%%;*}
    for ((i = 0; i < 600; i++)); do
        st=$(squeue -h -t all -j "$id" -o '%T' 2>/dev/null | head -n1)
        case "$st" in
            COMPLETED) return 0 ;;
            FAILED | CANCELLED | TIMEOUT | NODE_FAIL | BOOT_FAIL | OUT_OF_MEMORY)
                die "probe job $id ended $st (logs: $LOGS)" ;;
        esac
        sleep 0.1
    done
    die "probe job $id did not finish in 60 s (state: ${st:-?}; logs: $LOGS)"
}

# cancel_all_jobs: a full stop cancels every job first. Jobs whose processes were killed
# behind Slurm's back would otherwise show as RUNNING forever after the next start.
cancel_all_jobs() {
    local users u i
    pid_alive slurmctld slurmctld >/dev/null && ctld_up || return 0
    users=$(squeue -h -o '%u' 2>/dev/null | sort -u) || return 0
    [[ -n $users ]] || return 0
    log "cancelling $(squeue -h -r -o '%i' 2>/dev/null | wc -l) job(s)"
    for u in $users; do
        scancel --user="$u" >/dev/null 2>&1 || true
    done
    # Only a live slurmd ends the job steps; without it kill_job_steps does.
    for ((i = 0; i < 100; i++)); do
        pid_alive slurmd slurmd >/dev/null || break
        [[ -z $(squeue -h -o '%i' 2>/dev/null | head -n1) ]] && break
        sleep 0.2
    done
}

cmd_stop() {
    take_lock
    cancel_all_jobs
    stop_slurmd
    kill_job_steps
    stop_pid slurmctld slurmctld
    stop_pid slurmdbd slurmdbd
    stop_pid mariadbd mariadbd
    stop_pid munged munged
    rm -f "$RUN/config.sha"
    log "stopped"
}

cmd_status() {
    local ok=0 ctld=no slurmd=no munged=no dbd=no st
    pid_alive slurmctld slurmctld >/dev/null && ctld=yes
    dbd_ok && dbd=yes || ok=1
    pid_alive slurmd slurmd >/dev/null && slurmd=yes
    [[ $slurmd == yes || -n $(foreign_daemons slurmd) ]] || ok=1
    munge_ok && munged=yes || ok=1
    if ! ctld_up; then ok=1; fi
    st=$(node_state || true)
    node_usable || ok=1
    log "munge=$munged slurmdbd=$dbd slurmctld=$ctld slurmd=$slurmd node=${st:-?} ($( ((ok == 0)) && echo accepting jobs || echo NOT ready))"
    return $ok
}

cmd_start_slurmd() {
    take_lock
    pid_alive slurmctld slurmctld >/dev/null || die "slurmctld is not running: use start"
    start_munge
    start_slurmd
    log "slurmd running (node $(node_state))"
}

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit "$1"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    restart) cmd_stop && cmd_start ;;
    status) cmd_status ;;
    stop-slurmd) take_lock && stop_slurmd ;;
    start-slurmd) cmd_start_slurmd ;;
    restart-slurmd) take_lock && stop_slurmd && cmd_start_slurmd ;;
    install) take_lock && do_install ;;
    config) take_lock && do_config ;;
    -h | --help | help) usage 0 ;;
    *) usage 2 ;;
esac
