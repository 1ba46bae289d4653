#!/usr/bin/env bash
# Stops the one-node SLURM of jobs/local-slurm/up.sh: cancels its jobs, stops slurmd,
# slurmctld and munged by their pid files, removes the /etc/slurm/slurm.conf link to its
# configuration and its job state. The logs stay in PPACK_SLURM_DIR/log. Installed
# packages stay too. Running it again, or with nothing up, changes nothing.
set -euo pipefail

DIR=${PPACK_SLURM_DIR:-${TMPDIR:-/tmp}/ppack-local-slurm}
CONF_DIR=/etc/slurm
export PATH=$PATH:/usr/sbin:/sbin

say() { echo "local-slurm: $*"; }

if [[ ! -d $DIR ]]; then
    say "nothing to stop: no $DIR"
    exit 0
fi
[[ $(id -u) == 0 ]] || { echo "local-slurm: ERROR: must run as root, as up.sh did; try: sudo $0" >&2; exit 1; }

stop() {  # stop NAME: TERM the process of DIR/run/NAME.pid, wait, then KILL
    local pidfile=$DIR/run/$1.pid pid i
    if [[ ! -s $pidfile ]] || ! pid=$(cat "$pidfile") || ! kill -0 "$pid" 2>/dev/null; then
        say "$1 is not running"
        rm -f "$pidfile"
        return 0
    fi
    if [[ $(cat "/proc/$pid/comm" 2>/dev/null) != "$1" ]]; then  # a stale pid file, reused pid
        say "$1: pid $pid of $pidfile is $(cat "/proc/$pid/comm" 2>/dev/null || echo gone), not $1; left alone"
        rm -f "$pidfile"
        return 0
    fi
    say "stopping $1 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for (( i = 0; i < 150; i++ )); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
        say "$1 (pid $pid) still running after 30 s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}

# jobs first, so no job step outlives the daemons
if [[ -s $DIR/run/slurmctld.pid ]] && kill -0 "$(cat "$DIR/run/slurmctld.pid")" 2>/dev/null; then
    jobs=$(squeue -h -o %A 2>/dev/null | tr '\n' ' ') || jobs=
    if [[ -n ${jobs// } ]]; then
        say "cancelling jobs $jobs"
        # shellcheck disable=SC2086
        scancel $jobs 2>/dev/null || true
        for (( i = 0; i < 30; i++ )); do
            [[ -z $(squeue -h -t running,completing -o %A 2>/dev/null) ]] && break
            sleep 1
        done
    fi
fi

stop slurmd
stop slurmctld
stop munged
# job steps whose slurmstepd survived slurmd (it runs on its own)
for pid in $(pgrep -x slurmstepd 2>/dev/null || true); do
    if grep -qF "$DIR" "/proc/$pid/cmdline" "/proc/$pid/environ" 2>/dev/null ||
       [[ $(readlink "/proc/$pid/cwd" 2>/dev/null) == "$DIR"* ]]; then
        say "killing leftover slurmstepd (pid $pid)"
        kill -KILL "$pid" 2>/dev/null || true
    fi
done

if [[ -L $CONF_DIR/slurm.conf && $(readlink "$CONF_DIR/slurm.conf") == "$DIR/slurm.conf" ]]; then
    rm -f "$CONF_DIR/slurm.conf"
    if [[ -e $CONF_DIR/slurm.conf.ppack-backup ]]; then
        mv "$CONF_DIR/slurm.conf.ppack-backup" "$CONF_DIR/slurm.conf"
        say "restored the earlier $CONF_DIR/slurm.conf"
    fi
fi
rm -rf "$DIR/state" "$DIR/spool" "$DIR/run"
say "down; logs kept in $DIR/log"
