#!/usr/bin/env bash
# A one-node SLURM on this machine, to try the scripts of jobs/ for real (jobs/README.md,
# "Trying the scripts on a real local SLURM"). Needs root and Debian or Ubuntu (apt-get).
#
#   sudo jobs/local-slurm/up.sh        # install if missing, configure, start, wait for the node
#   sudo jobs/local-slurm/down.sh      # stop what up.sh started
#
# Installs slurmctld, slurmd, slurm-client and munge when missing (their services are not
# started by the install), writes munge's key and a minimal slurm.conf for this host, and
# starts munged, slurmctld and slurmd with every file of theirs (config, state, spool,
# logs, pid files) under one folder, PPACK_SLURM_DIR (default ${TMPDIR:-/tmp}/ppack-local-slurm).
# slurm.conf goes to /etc/slurm/slurm.conf too: sbatch, srun and scontrol read it there.
# Running it again while the cluster is up changes nothing.
set -euo pipefail

DIR=${PPACK_SLURM_DIR:-${TMPDIR:-/tmp}/ppack-local-slurm}
CONF_DIR=/etc/slurm                 # where the Debian client tools look for slurm.conf
WAIT=${PPACK_SLURM_WAIT:-60}        # seconds to wait for the node to become idle

say() { echo "local-slurm: $*"; }
die() { echo "local-slurm: ERROR: $*" >&2; exit 1; }

alive() {  # alive PIDFILE: the process of the pid file runs
    [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

[[ $(id -u) == 0 ]] || die "must run as root (it installs packages and starts slurmd as root); try: sudo $0"
[[ $(uname -s) == Linux ]] || die "needs Linux, found $(uname -s)"

# ---- packages ------------------------------------------------------------------------
need=()
for tool in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || [[ -x /usr/sbin/${tool%%:*} ]] || need+=("${tool#*:}")
done
if (( ${#need[@]} )); then
    command -v apt-get >/dev/null || die "missing ${need[*]} and no apt-get to install them (Debian/Ubuntu only);" \
        "install SLURM (slurmctld, slurmd, client tools) and munge yourself, then run this again"
    say "installing ${need[*]} (apt-get)"
    # Keep the packages' own services from starting: this script starts the daemons itself.
    policy=/usr/sbin/policy-rc.d
    made_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && made_policy=1
    fi
    status=0
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" ||
      { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"; }
    } || status=$?
    (( made_policy )) && rm -f "$policy"
    (( status == 0 )) || die "apt-get install ${need[*]} failed (status $status); see the messages above"
fi
export PATH=$PATH:/usr/sbin:/sbin
for tool in slurmctld slurmd sbatch srun scontrol sinfo munged; do
    command -v "$tool" >/dev/null || die "$tool not found after the install"
done

mkdir -p "$DIR"/{munge,state,spool,log,run}
chmod 700 "$DIR/munge"

# ---- munge: own key, socket and pid file under DIR ------------------------------------
MUNGE_SOCKET=$DIR/munge/munge.socket
if alive "$DIR/run/munged.pid"; then
    say "munged already running (pid $(cat "$DIR/run/munged.pid"))"
else
    [[ -s $DIR/munge/munge.key ]] || { dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
                                       chmod 400 "$DIR/munge/munge.key"; }
    say "starting munged"
    munged --force --key-file="$DIR/munge/munge.key" --socket="$MUNGE_SOCKET" \
        --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed" \
        || die "munged did not start; see $DIR/log/munged.log"
fi

# ---- slurm.conf ---------------------------------------------------------------------
HOST=$(hostname -s)
CPUS=$(nproc --all)
# what slurmd itself reports (sockets, cores, threads, memory), so the node is not drained
# for a mismatch; the memory a little below it
read -r SOCKETS CORES THREADS MEM < <(slurmd -C 2>/dev/null | awk '
    /NodeName=/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
    END { print v["SocketsPerBoard"] + 0, v["CoresPerSocket"] + 0, v["ThreadsPerCore"] + 0, v["RealMemory"] + 0 }')
if (( SOCKETS * CORES * THREADS != CPUS )); then  # slurmd -C unavailable or odd: one socket, one thread per core
    SOCKETS=1 CORES=$CPUS THREADS=1
fi
(( MEM > 0 )) || MEM=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
MEM=$(( MEM * 95 / 100 ))

CONF=$DIR/slurm.conf
cat > "$CONF.new" <<EOF
# Written by jobs/local-slurm/up.sh: a one-node SLURM for trying jobs/*.sbatch.
ClusterName=ppack-local
# Job ids do not start at 1 again with each new cluster: SLURM's PMI2 names a step's key
# space "jobid.stepid" and MPICH names its shared memory after it, so a segment left in
# /dev/shm by a killed run would be picked up by a later job with the same id.
FirstJobId=$(( $(date +%s) % 60000000 + 1 ))
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# munge socket under the state folder; a job credential expires after 10 s instead of
# 120 s, so a requeued job may start again 10 s after its predecessor ended
AuthInfo=socket=$MUNGE_SOCKET,cred_expire=10
# the pip mpich wheel of mpi4py starts under plain srun through PMI2
MpiDefault=pmi2
# no cgroups needed (containers, WSL): track and signal tasks through their process tree
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=5,sched_min_interval=200000
JobRequeue=1
ReturnToService=2
# seconds between SIGTERM and SIGKILL when a job is cancelled, requeued or hits its limit
KillWait=10
# a finished job stays visible to scontrol show job for 5 minutes
MinJobAge=300
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=20
# no accounting
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmctldPort=${PPACK_SLURMCTLD_PORT:-6817}
SlurmdPort=${PPACK_SLURMD_PORT:-6818}
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS Sockets=$SOCKETS CoresPerSocket=$CORES ThreadsPerCore=$THREADS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
mv "$CONF.new" "$CONF"

# /etc/slurm/slurm.conf: a link to ours; a different file there is kept as .ppack-backup
mkdir -p "$CONF_DIR"
if [[ -e $CONF_DIR/slurm.conf && ! -L $CONF_DIR/slurm.conf ]]; then
    say "keeping the existing $CONF_DIR/slurm.conf as $CONF_DIR/slurm.conf.ppack-backup"
    mv "$CONF_DIR/slurm.conf" "$CONF_DIR/slurm.conf.ppack-backup"
fi
ln -sfn "$CONF" "$CONF_DIR/slurm.conf"

# ---- the daemons --------------------------------------------------------------------
if alive "$DIR/run/slurmctld.pid"; then
    say "slurmctld already running (pid $(cat "$DIR/run/slurmctld.pid")); re-reading slurm.conf"
    scontrol reconfigure >/dev/null || say "scontrol reconfigure failed (continuing)"
else
    say "starting slurmctld"
    # -c: start with no jobs left over from an earlier run
    slurmctld -c -f "$CONF" || die "slurmctld did not start; see $DIR/log/slurmctld.log"
fi
if alive "$DIR/run/slurmd.pid"; then
    say "slurmd already running (pid $(cat "$DIR/run/slurmd.pid"))"
else
    say "starting slurmd"
    slurmd -f "$CONF" || die "slurmd did not start; see $DIR/log/slurmd.log"
fi

say "waiting up to ${WAIT}s for node $HOST to become idle"
state=
for (( i = 0; i < WAIT; i++ )); do
    state=$(sinfo -h -n "$HOST" -o %T 2>/dev/null | head -n 1) || true
    case $state in
        idle|mixed|allocated) break ;;
        drain*|down*) scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 1
done
case $state in
    idle|mixed|allocated) ;;
    *) tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
       die "node $HOST is '${state:-unknown}' after ${WAIT}s (logs above, in $DIR/log)" ;;
esac
say "up: node $HOST $state, $CPUS CPUs, ${MEM} MB; state, logs and slurm.conf in $DIR"
say "try: sinfo; sbatch --wrap hostname; stop it with: $(dirname "$0")/down.sh"
