#!/usr/bin/env bash
# A real multi-node Slurm cluster on this one machine, beside the single-node one of slurm.sh: for what needs
# several nodes (a bad node excluded while the others work: bench/self_healing.py --system slurm).
#
# Debian's slurmd serves one node name per daemon (-N) on the port that slurm.conf gives that node, so several
# slurmd run side by side, each a node of its own. The cluster is "multi": its own slurm.conf
# (/etc/slurm-multi/slurm.conf, reached with SLURM_CONF), its own slurmctld port (6917) and state, and the
# munged, MariaDB and slurmdbd that slurm.sh starts (accounting: sacct works). It is meant to live only while a
# benchmark or test uses it: slurm.sh refuses to start daemons while daemons it did not start run.
#
# Usage: tests/clusters/slurm-multi.sh SUBCOMMAND
#   start            start slurm.sh's cluster if needed (munge, slurmdbd), then slurmctld and one slurmd per
#                    node, and wait until every node is idle; idempotent
#   stop             cancel the jobs, stop the slurmds and slurmctld (slurm.sh's cluster goes on)
#   status           exit 0 if every node takes jobs
#   env              print the line that points Slurm's commands at this cluster (export SLURM_CONF=...)
#   bad-node N DIR   restart node N's slurmd in a mount namespace of its own where DIR is an empty tmpfs: every
#                    job that starts on N finds neither its folder nor its files (a lost file system mount)
#   heal-node N DIR  unmount that tmpfs inside the node's namespace: later jobs on N work again
#
# Environment: B2BATCH_SLURM_MULTI_NODES (default 4: nodes m1..m4), B2BATCH_SLURM_MULTI_CPUS (CPUs each node
# advertises, default 4), B2BATCH_SLURM_MULTI_MEMORY (MB each node advertises, default 4000).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BASE=/var/lib/b2batch-slurm-multi
CONF_DIR=/etc/slurm-multi
export SLURM_CONF=$CONF_DIR/slurm.conf
NODES=${B2BATCH_SLURM_MULTI_NODES:-4}
CPUS=${B2BATCH_SLURM_MULTI_CPUS:-4}
MEMORY=${B2BATCH_SLURM_MULTI_MEMORY:-4000}
HOST=$(hostname -s)
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

log() { echo "slurm-multi.sh: $*" >&2; }
die() { echo "slurm-multi.sh: ERROR: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "must run as root"
[[ $NODES =~ ^[1-9][0-9]?$ ]] || die "B2BATCH_SLURM_MULTI_NODES must be 1..99, not '$NODES'"

node_names() { local i; for ((i = 1; i <= NODES; i++)); do echo "m$i"; done; }

render_conf() {
    cat <<EOF
# Written by tests/clusters/slurm-multi.sh (b2batch): $NODES nodes, one slurmd each, on this machine.
ClusterName=multi
SlurmctldHost=${HOST}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
SlurmctldPort=6917
StateSaveLocation=$BASE/ctld
SlurmdSpoolDir=$BASE/slurmd/%n
SlurmctldPidFile=$BASE/run/slurmctld.self.pid
SlurmdPidFile=$BASE/run/slurmd-%n.self.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=$((MEMORY / CPUS))
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,default_queue_depth=1000,bf_interval=5
SlurmdParameters=config_overrides
ReturnToService=2
MaxArraySize=100001
MinJobAge=600
KillWait=5
OverTimeLimit=0
InactiveLimit=0
SlurmdTimeout=60
EOF
    local n i=0
    for n in $(node_names); do
        i=$((i + 1))
        echo "NodeName=$n NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((6920 + i)) CPUs=$CPUS RealMemory=$MEMORY State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=m[1-$NODES] Default=YES MaxTime=INFINITE State=UP"
}

pid_of() { # NAME: the live pid recorded for our daemon NAME (slurmctld or slurmd-<node>), or nothing
    local f=$BASE/run/$1.pid pid
    [[ -s $f ]] || return 1
    pid=$(<"$f")
    [[ -r /proc/$pid/comm && $(<"/proc/$pid/comm") == "${1%%-*}" ]] || return 1
    grep -q "^State:[[:space:]]*[^ZX]" "/proc/$pid/status" 2>/dev/null || return 1
    echo "$pid"
}

spawn() { # NAME CMD...: a daemon in a session of its own, its pid recorded
    local name=$1
    shift
    (cd "$BASE/log" && exec setsid "$@" </dev/null >>"$BASE/log/$name.out" 2>&1) &
    echo $! >"$BASE/run/$name.pid"
}

stop_daemon() {
    local pid i
    pid=$(pid_of "$1") || { rm -f "$BASE/run/$1.pid"; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do pid_of "$1" >/dev/null || break; sleep 0.1; done
    pid_of "$1" >/dev/null && kill -KILL "$pid" 2>/dev/null
    rm -f "$BASE/run/$1.pid"
}

node_state() { sinfo -h -N -n "$1" -o '%T' 2>/dev/null | head -n1; }

wait_nodes() {
    local i n ok
    for ((i = 0; i < 300; i++)); do
        ok=1
        for n in $(node_names); do
            case "$(node_state "$n")" in
                idle | mixed | allocated | completing) ;;
                down* | drain*) scontrol update nodename="$n" state=resume >/dev/null 2>&1 || true; ok=0 ;;
                *) ok=0 ;;
            esac
        done
        ((ok)) && return 0
        sleep 0.2
    done
    sinfo -N >&2 || true
    die "not every node became idle (logs: $BASE/log)"
}

start_slurmd() { # NODE [DIR]: with DIR, in a mount namespace where DIR is an empty tmpfs
    mkdir -p "$BASE/slurmd/$1"
    if [[ -n ${2:-} ]]; then
        spawn "slurmd-$1" unshare --mount --propagation private \
            sh -c 'mount -t tmpfs -o size=1m b2batch-lost-mount "$1" && shift && exec "$@"' sh "$2" \
            slurmd -D -N "$1"
    else
        spawn "slurmd-$1" slurmd -D -N "$1"
    fi
}

cmd_start() {
    local n new
    env -u SLURM_CONF bash "$HERE/slurm.sh" start >&2 # munge, MariaDB, slurmdbd (of its own slurm.conf)
    mkdir -p "$BASE"/{ctld,run,log,slurmd} "$CONF_DIR"
    new=$(render_conf)
    if [[ ! -f $SLURM_CONF || $(<"$SLURM_CONF") != "$new" ]]; then
        cmd_stop
        printf '%s\n' "$new" >"$SLURM_CONF"
        rm -rf "${BASE:?}/ctld" && mkdir -p "$BASE/ctld"
    fi
    if ! sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx multi; then
        sacctmgr -i add cluster multi >/dev/null || die "sacctmgr add cluster multi failed"
        sacctmgr -i add account b2batch cluster=multi >/dev/null 2>&1 || true
        sacctmgr -i add user root account=b2batch cluster=multi >/dev/null 2>&1 || true
    fi
    if ! pid_of slurmctld >/dev/null; then
        log "starting slurmctld of cluster multi"
        spawn slurmctld slurmctld -D
        for ((n = 0; n < 300; n++)); do scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.1; done
    fi
    for n in $(node_names); do
        pid_of "slurmd-$n" >/dev/null || start_slurmd "$n"
    done
    wait_nodes
    log "cluster multi running: nodes $(node_names | paste -sd, -) (SLURM_CONF=$SLURM_CONF)"
}

cmd_stop() {
    local n
    if pid_of slurmctld >/dev/null; then
        scancel --user=root >/dev/null 2>&1 || true
        for ((n = 0; n < 50; n++)); do [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break; sleep 0.2; done
    fi
    for f in "$BASE"/run/slurmd-*.pid; do [[ -e $f ]] && stop_daemon "$(basename "$f" .pid)"; done
    stop_daemon slurmctld
    log "cluster multi stopped"
}

cmd_bad_node() {
    local node=$1 dir=$2
    [[ -d $dir ]] || die "bad-node: no folder $dir"
    pid_of "slurmd-$node" >/dev/null || die "bad-node: node $node's slurmd is not running"
    stop_daemon "slurmd-$node"
    start_slurmd "$node" "$dir"
    wait_nodes
    log "node $node: $dir is an empty tmpfs for its jobs"
}

cmd_heal_node() {
    local node=$1 dir=$2 pid
    pid=$(pid_of "slurmd-$node") || die "heal-node: node $node's slurmd is not running"
    nsenter --mount="/proc/$pid/ns/mnt" umount "$dir" 2>/dev/null || true
    log "node $node: $dir is back"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) for n in $(node_names); do case "$(node_state "$n")" in idle | mixed | allocated | completing) ;; *) exit 1 ;; esac; done ;;
    env) echo "export SLURM_CONF=$SLURM_CONF" ;;
    bad-node) cmd_bad_node "${2:?node}" "${3:?folder}" ;;
    heal-node) cmd_heal_node "${2:?node}" "${3:?folder}" ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
