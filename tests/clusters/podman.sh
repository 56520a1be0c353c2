#!/usr/bin/env bash
# Podman for b2batch's container tests: installs it, makes it work in this (nested, hybrid-cgroup) machine and
# prepares a local image, since there is no registry to pull from.
#
#   tests/clusters/podman.sh start    install if needed, configure, import the image, run a probe (idempotent)
#   tests/clusters/podman.sh status   exit 0 when the image runs
#
# - Debian 12's podman 4.3 with runc: crun refuses this machine's hybrid cgroups ("cgroups in hybrid mode not
#   supported"), and setting the default rlimits is not permitted here, so /etc/containers/containers.conf
#   (written only when absent or ours) names runc and no default ulimits.
# - The image $IMAGE is a skeleton root file system (/usr symlinks, /etc/passwd, /etc/group): a job mounts the
#   host's /usr read-only and the Python it runs (the tests do), so it needs no registry and no download.
set -euo pipefail

IMAGE=${B2BATCH_PODMAN_IMAGE:-localhost/b2batch-test:latest}
CONF=/etc/containers/containers.conf
MARK="# written by b2batch tests/clusters/podman.sh"

log() { printf 'podman.sh: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ $(id -u) == 0 ]] || die "must run as root"
export DEBIAN_FRONTEND=noninteractive

install() {
    command -v podman >/dev/null && command -v runc >/dev/null && return
    log "installing podman and runc"
    apt-get update -qq >/dev/null
    apt-get install -y -qq podman runc >/dev/null
}

configure() {
    if [[ -e $CONF ]] && ! grep -qF "$MARK" "$CONF"; then
        log "$CONF exists and is not ours: left as it is"
        return
    fi
    mkdir -p "$(dirname "$CONF")"
    printf '%s\n[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n' "$MARK" > "$CONF.tmp"
    mv -f "$CONF.tmp" "$CONF"
}

prepare_image() {
    podman image exists "$IMAGE" && return
    log "importing $IMAGE"
    local root
    root=$(mktemp -d)
    mkdir -p "$root"/{etc,proc,sys,dev,tmp,root,usr,run,var/tmp,home}
    chmod 1777 "$root/tmp" "$root/var/tmp"
    for d in bin lib lib64 sbin; do ln -s "usr/$d" "$root/$d"; done
    cp /etc/passwd /etc/group "$root/etc/"
    tar -C "$root" -cf "$root.tar" .
    podman import --change 'CMD ["/bin/sh"]' "$root.tar" "$IMAGE" >/dev/null
    rm -rf "$root" "$root.tar"
}

probe() {
    timeout 120 podman run --rm --network=host --volume=/usr:/usr:ro "$IMAGE" /bin/sh -c 'exit 0'
}

case ${1:-start} in
    start) install; configure; prepare_image; probe || die "a probe container of $IMAGE failed"; log "ready: $IMAGE" ;;
    status) probe ;;
    *) die "usage: $0 start|status" ;;
esac
