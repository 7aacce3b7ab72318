#!/usr/bin/env bash
# A single-node SLURM cluster on 127.0.0.1 for tests and laptops, without systemd.
#
#   slurm/local_cluster.sh up       install (Debian: munge slurmctld slurmd slurm-client slurmdbd
#                                    mariadb-server) if missing, write the configs, start the daemons
#   slurm/local_cluster.sh down     stop exactly the daemons `up` started (by recorded PID)
#   slurm/local_cluster.sh status   which recorded daemons are alive, and sinfo
#
# Needs root (it installs packages and writes /etc/slurm). State, PIDs and logs live in
# $NESYSEQ_SLURM_STATE (default /var/lib/nesyseq-slurm). Measured facts for slurm 22.05 on
# Debian 12 that shaped this file are in docs/slurm.md ("The local cluster").
set -euo pipefail

STATE=${NESYSEQ_SLURM_STATE:-/var/lib/nesyseq-slurm}
CLUSTER=nesyseq
PKGS=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server)
DB_PASS=nesyseq-local-only   # a local test database on a unix socket; not a secret

log() { echo "local_cluster: $*" >&2; }
die() { log "error: $*"; exit 1; }

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

record_pid() {  # name pidfile-or-pid
    local pid=$2
    if [ -f "$2" ]; then pid=$(tr -dc 0-9 <"$2"); fi
    echo "$pid" >"$STATE/pids/$1"
}

wait_for() {  # seconds description command...
    local n=$(( $1 * 5 )) what=$2; shift 2
    for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
    die "$what did not come up; see $STATE/log"
}

install_packages() {
    local missing=()
    for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || die "apt-get not found: install ${missing[*]} yourself"
    log "installing ${missing[*]}"
    # The package scripts must not start daemons (no systemd here; we start our own).
    local made_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; made_policy=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >"$STATE/log/apt.log" 2>&1; then
        apt-get update -q >>"$STATE/log/apt.log" 2>&1 || true
        apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$STATE/log/apt.log" 2>&1 \
            || { [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d; die "apt-get install failed; see $STATE/log/apt.log"; }
    fi
    [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
    return 0
}

write_configs() {
    local host node cpus_line mem
    host=$(hostname -s)
    mkdir -p /etc/slurm "$STATE"/{spool/ctld,spool/d,log,pids}
    # The node line exactly as slurmd measures this machine (slurmd -C), on 127.0.0.1.
    node=$(slurmd -C | head -n1)
    [[ $node == NodeName=* ]] || die "slurmd -C printed no NodeName line: $node"
    mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node")
    cpus_line=$(sed 's/ UpTime=.*//' <<<"$node")
    cat >/etc/slurm/slurm.conf <<EOF
# Written by nesyseq slurm/local_cluster.sh: single-node test cluster on 127.0.0.1.
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
CredType=cred/munge
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
JobRequeue=1
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$(( mem / 8 > 256 ? 256 : mem / 8 ))
KillWait=5
MinJobAge=300
InactiveLimit=0
Waittime=0
MessageTimeout=20
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
$cpus_line NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    cat >/etc/slurm/slurmdbd.conf <<EOF
# Written by nesyseq slurm/local_cluster.sh.
AuthType=auth/munge
DbdHost=$host
DbdAddr=127.0.0.1
SlurmUser=root
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=$DB_PASS
EOF
    chmod 600 /etc/slurm/slurmdbd.conf
}

start_munge() {
    if alive "$(cat "$STATE/pids/munged" 2>/dev/null)"; then return 0; fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    chmod 755 /run/munge
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    fi
    chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
    rm -f /run/munge/munged.pid
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid >>"$STATE/log/munged.out" 2>&1 \
        || die "munged failed to start; see $STATE/log/munged.out"
    wait_for 10 munged test -s /run/munge/munged.pid
    record_pid munged /run/munge/munged.pid
}

start_mariadb() {
    if alive "$(cat "$STATE/pids/mariadbd" 2>/dev/null)"; then return 0; fi
    mkdir -p /run/mysqld; chown mysql:mysql /run/mysqld
    if [ ! -d /var/lib/mysql/mysql ]; then
        mariadb-install-db --user=mysql --datadir=/var/lib/mysql >"$STATE/log/mariadb-install.log" 2>&1
    fi
    local bin
    bin=$(command -v mariadbd || echo /usr/sbin/mariadbd)
    nohup "$bin" --user=mysql --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock \
        --pid-file=/run/mysqld/nesyseq-mariadbd.pid --skip-networking --innodb-use-native-aio=0 \
        >>"$STATE/log/mariadbd.log" 2>&1 &
    echo $! >"$STATE/pids/mariadbd"
    wait_for 30 mariadb mariadb -u root -e 'select 1'
    mariadb -u root <<EOF
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
EOF
}

start_slurm() {
    if ! alive "$(cat "$STATE/pids/slurmdbd" 2>/dev/null)"; then
        rm -f "$STATE/slurmdbd.pid"
        slurmdbd >>"$STATE/log/slurmdbd.out" 2>&1 || die "slurmdbd failed; see $STATE/log/slurmdbd.log"
        wait_for 20 slurmdbd test -s "$STATE/slurmdbd.pid"
        record_pid slurmdbd "$STATE/slurmdbd.pid"
        wait_for 30 "slurmdbd (sacctmgr)" sacctmgr -n list cluster
    fi
    sacctmgr -i -Q add cluster "$CLUSTER" >/dev/null 2>&1 || true
    if ! alive "$(cat "$STATE/pids/slurmctld" 2>/dev/null)"; then
        rm -f "$STATE/slurmctld.pid"
        slurmctld -i >>"$STATE/log/slurmctld.out" 2>&1 || die "slurmctld failed; see $STATE/log/slurmctld.log"
        wait_for 20 slurmctld test -s "$STATE/slurmctld.pid"
        record_pid slurmctld "$STATE/slurmctld.pid"
    fi
    if ! alive "$(cat "$STATE/pids/slurmd" 2>/dev/null)"; then
        rm -f "$STATE/slurmd.pid"
        slurmd >>"$STATE/log/slurmd.out" 2>&1 || die "slurmd failed; see $STATE/log/slurmd.log"
        wait_for 20 slurmd test -s "$STATE/slurmd.pid"
        record_pid slurmd "$STATE/slurmd.pid"
    fi
    wait_for 30 "an idle node" bash -c "sinfo -h -o %t | grep -Eq '^(idle|mix|alloc)'"
}

cmd_up() {
    [ "$(id -u)" = 0 ] || die "must run as root (installs packages, writes /etc/slurm)"
    mkdir -p "$STATE"/{log,pids}
    install_packages
    write_configs
    start_munge
    start_mariadb
    start_slurm
    log "up: $(sinfo -h -o '%P %D %t %c cpus %m MB' | head -n1)"
}

cmd_down() {
    # Stop, in reverse order, only the daemons whose PIDs `up` recorded.
    local name pid
    for name in slurmd slurmctld slurmdbd mariadbd munged; do
        pid=$(cat "$STATE/pids/$name" 2>/dev/null || true)
        if alive "$pid"; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
            alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
            log "stopped $name ($pid)"
        fi
        rm -f "$STATE/pids/$name"
    done
}

cmd_status() {
    local name pid rc=0
    for name in munged mariadbd slurmdbd slurmctld slurmd; do
        pid=$(cat "$STATE/pids/$name" 2>/dev/null || true)
        if alive "$pid"; then echo "$name running (pid $pid)"; else echo "$name not running"; rc=1; fi
    done
    [ $rc = 0 ] && sinfo
    return $rc
}

case "${1:-}" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
