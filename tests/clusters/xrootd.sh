#!/usr/bin/env bash
# A real XRootD server on localhost, for b2batch's remote-target tests.
#
# Debian 12's xrootd-server (XRootD 5.5), run as root without systemd: the daemon runs in the
# foreground, detached with setsid, as user xrootd; its PID is kept in a pid file so that `stop`
# ends exactly what `start` started. Anonymous access, read and write, on localhost only.
#
# Usage: tests/clusters/xrootd.sh SUBCOMMAND
#   start     install if needed, configure, start if not running, then probe it; idempotent
#   stop      stop the server this script started (waits until it has exited)
#   restart   stop, then start
#   status    exit 0 if the server answers (prints a one-line summary)
#   url       print the server's URL, e.g. root://localhost:1094
#   install   only install the packages
#
# Files under $B2BATCH_XROOTD_DIR (default /var/lib/b2batch-xrootd): xrootd.cfg, run/ (pid file),
# log/ (server log), admin/, data/ (what the server exports: root://localhost:PORT//a/b is
# data/a/b).
#
# Environment: B2BATCH_XROOTD_DIR, B2BATCH_XROOTD_PORT (default 1094). A second instance (tests
# that stop a server for a while) uses another directory and port.
set -euo pipefail

BASE=${B2BATCH_XROOTD_DIR:-/var/lib/b2batch-xrootd}
PORT=${B2BATCH_XROOTD_PORT:-1094}
RUN=$BASE/run
LOGS=$BASE/log
DATA=$BASE/data
CONF=$BASE/xrootd.cfg
PACKAGES=(xrootd-server xrootd-client)
POLICY_LOCK=/var/lock/b2batch-policy-rc.lock
POLICY_FILE=/usr/sbin/policy-rc.d
POLICY_MARK=b2batch-xrootd
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

log() { echo "xrootd.sh: $*" >&2; }
die() { echo "xrootd.sh: ERROR: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root"
[[ $PORT =~ ^[0-9]+$ ]] || die "B2BATCH_XROOTD_PORT must be a port number, not '$PORT'"

# ---------------------------------------------------------------- install
installed() { command -v xrootd >/dev/null 2>&1 && command -v xrdfs >/dev/null 2>&1; }

POLICY_CREATED=0
remove_policy() {
    if [[ $POLICY_CREATED == 1 ]] && grep -q "$POLICY_MARK" "$POLICY_FILE" 2>/dev/null; then
        rm -f "$POLICY_FILE"
    fi
    POLICY_CREATED=0
}

do_install() {
    installed && return 0
    local t0=$SECONDS i
    mkdir -p "$LOGS"
    log "installing ${PACKAGES[*]}"
    # The lock shared with tests/clusters/slurm.sh and sge.sh around policy-rc.d and apt.
    exec 8>"$POLICY_LOCK"
    flock -w 1800 8 || die "could not take $POLICY_LOCK"
    if [[ ! -e $POLICY_FILE ]]; then
        printf '#!/bin/sh\n# temporary, made by %s (tests/clusters/xrootd.sh)\nexit 101\n' "$POLICY_MARK" \
            >"$POLICY_FILE"
        chmod 0755 "$POLICY_FILE"
        POLICY_CREATED=1
        trap remove_policy EXIT
        trap 'exit 130' INT TERM HUP
    fi
    export DEBIAN_FRONTEND=noninteractive
    for ((i = 1; ; i++)); do
        apt-get -q -o DPkg::Lock::Timeout=900 update >"$LOGS/apt-update.log" 2>&1 && break
        ((i < 10)) || { cat "$LOGS/apt-update.log" >&2; die "apt-get update failed"; }
        log "apt-get update failed (try $i), retrying in 10 s"
        sleep 10
    done
    for ((i = 1; ; i++)); do
        apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=900 \
            "${PACKAGES[@]}" >"$LOGS/apt-install.log" 2>&1 && break
        ((i < 3)) || { tail -n 30 "$LOGS/apt-install.log" >&2; die "apt-get install failed"; }
        log "apt-get install failed (try $i), retrying in 10 s"
        sleep 10
    done
    remove_policy
    flock -u 8
    exec 8>&-
    installed || die "packages installed but xrootd/xrdfs not found"
    log "installed in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------- configuration
render_conf() {
    cat <<EOF
# Written by tests/clusters/xrootd.sh (b2batch): a test server on localhost. Do not edit.
xrd.port ${PORT}
xrd.allow host localhost
xrd.allow host 127.0.0.1
all.role server
all.adminpath ${BASE}/admin
all.pidpath ${RUN}
oss.localroot ${DATA}
all.export / writable
EOF
}

do_config() {
    local user
    mkdir -p "$RUN" "$LOGS" "$BASE/admin" "$DATA"
    user=$(server_user)
    [[ $user == root ]] || chown "$user" "$BASE/admin" "$DATA" "$LOGS"
    local new
    new=$(render_conf)
    if [[ ! -f $CONF ]] || [[ $(<"$CONF") != "$new" ]]; then
        printf '%s\n' "$new" >"$CONF.tmp.$$"
        mv -f "$CONF.tmp.$$" "$CONF"
    fi
}

server_user() { id xrootd >/dev/null 2>&1 && echo xrootd || echo root; }

# ---------------------------------------------------------------- the daemon
pid_alive() {
    local f=$RUN/b2batch-xrootd.pid pid
    [[ -s $f ]] || return 1
    pid=$(<"$f")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ -r /proc/$pid/comm && $(<"/proc/$pid/comm") == xrootd ]] 2>/dev/null || return 1
    grep -q " Z\| X" <(cut -d')' -f2 "/proc/$pid/stat" 2>/dev/null | cut -c1-2) && return 1
    echo "$pid"
}

answers() { timeout 10 xrdfs "localhost:$PORT" stat / >/dev/null 2>&1; }

start_server() {
    local i pid user
    if pid_alive >/dev/null; then
        answers && return 0
        log "our xrootd (pid $(pid_alive)) does not answer: restarting it"
        stop_server
    fi
    user=$(server_user)
    log "starting xrootd on port $PORT (data in $DATA)"
    (cd "$LOGS" && exec setsid xrootd -c "$CONF" -n "b2batch-$PORT" -R "$user" -l "$LOGS/xrootd.log" \
        </dev/null >>"$LOGS/xrootd.out" 2>&1 8>&- 9>&-) &
    pid=$!
    echo "$pid" >"$RUN/b2batch-xrootd.pid"
    for ((i = 0; i < 300; i++)); do
        answers && return 0
        [[ -d /proc/$pid ]] || break
        sleep 0.1
    done
    tail -n 20 "$LOGS/xrootd.out" "$LOGS"/xrootd.log* >&2 2>/dev/null || true
    die "xrootd did not answer on port $PORT (logs: $LOGS)"
}

stop_server() {
    local pid i
    if pid=$(pid_alive); then
        log "stopping xrootd (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do
            pid_alive >/dev/null || break
            sleep 0.1
        done
        if pid_alive >/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
        fi
    fi
    rm -f "$RUN/b2batch-xrootd.pid"
}

# ---------------------------------------------------------------- subcommands
take_lock() {
    mkdir -p "$RUN" "$LOGS"
    exec 9>"$BASE/lock"
    flock -w 900 9 || die "could not take $BASE/lock"
}

cmd_start() {
    local t0=$SECONDS
    take_lock
    do_install
    do_config
    start_server
    log "xrootd running: root://localhost:$PORT (in $((SECONDS - t0)) s)"
}

cmd_status() {
    if pid_alive >/dev/null && answers; then
        log "xrootd (pid $(pid_alive)) answers on root://localhost:$PORT"
        return 0
    fi
    log "xrootd on port $PORT: NOT running"
    return 1
}

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit "$1"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) take_lock && stop_server && log "stopped" ;;
    restart) take_lock && stop_server && cmd_start ;;
    status) cmd_status ;;
    url) echo "root://localhost:$PORT" ;;
    install) take_lock && do_install ;;
    -h | --help | help) usage 0 ;;
    *) usage 2 ;;
esac
