#!/usr/bin/env bash
# A one-node SLURM cluster with accounting on this machine, for trying the cluster path on a workstation and for
# the `slurm` tests: munged, MariaDB, slurmdbd, slurmctld and slurmd from the Debian packages, everything (keys,
# configs, databases, logs, pid files, sockets) under one state folder, no systemd, no TTY.
#
#   scripts/slurm_local.sh install   apt-get the Debian packages when they are missing (root)
#   scripts/slurm_local.sh start     start the daemons (idempotent: running ones are kept, a killed or restarted
#                                    one -- a zombie, a stale pid file -- is started again), wait for the node
#   scripts/slurm_local.sh status    which daemons run; sinfo
#   scripts/slurm_local.sh stop      stop the daemons by their pid files (the state folder stays: start again)
#   scripts/slurm_local.sh env       the line to eval for the client commands: export SLURM_CONF=...
#
# State folder: $LRA_SLURM_DIR (default ~/.cache/lra-bench/slurm). Ports: $LRA_SLURM_PORT_BASE (default 16810)
# + 7 (slurmctld), + 8 (slurmd), + 9 (slurmdbd), + 6 (MariaDB, on 127.0.0.1 only). $LRA_SLURM_CPUS: job slots
# on the node when not its core count (the tests run 4 one-CPU jobs at once on 2 cores). Then, for example:
#   eval "$(scripts/slurm_local.sh env)"; python run.py -m attention=softmax,linear profile=smoke \
#     hydra/launcher=slurm hydra.launcher.gpus_per_node=null hydra.launcher.cpus_per_task=1 hydra.launcher.mem_gb=1
# Short credential lifetime and scheduler intervals: a requeued job runs again ~15 s later (not the default 2 min).
set -euo pipefail

STATE=${LRA_SLURM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lra-bench/slurm}
BASE=${LRA_SLURM_PORT_BASE:-16810}
CTLD_PORT=$((BASE + 7)) SLURMD_PORT=$((BASE + 8)) DBD_PORT=$((BASE + 9)) DB_PORT=$((BASE + 6))
CLUSTER=lrabench
PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server)
DAEMONS=(slurmd slurmctld slurmdbd mariadbd munged)  # as `status` lists them
HOST=$(hostname -s)

die() { echo "slurm_local.sh: $*" >&2; exit 1; }
pidfile() { echo "$STATE/run/$1.pid"; }
alive() {  # alive PID: a process that runs (a zombie -- killed, not yet reaped by an init that never reaps -- does not)
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}
running() {  # running NAME: its pid file names a live process of that name (not a zombie, not a reused pid)
  local f pid; f=$(pidfile "$1")
  [[ -s $f ]] || return 1
  pid=$(cat "$f")
  alive "$pid" && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "${1:0:15}"* ]]
}
wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local limit=$1 what=$2; shift 2
  local end=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || die "$what did not come up in ${limit}s (logs: $STATE/log)"
    sleep 0.2
  done
}

missing_packages() {
  local p out=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || out+=("$p")
  done
  echo "${out[@]}"
}

cmd_install() {
  local missing; missing=$(missing_packages)
  [[ -z $missing ]] && { echo "Debian packages present: ${PACKAGES[*]}"; return; }
  command -v apt-get >/dev/null || die "apt-get not found: install ${missing} by hand"
  [[ $(id -u) == 0 ]] || die "installing ${missing} needs root (apt-get)"
  echo "installing ${missing} (apt-get)"
  # The packages' init scripts try to start system-wide daemons: policy-rc.d 101 keeps them from doing so.
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [[ ! -e $policy ]]; then printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"; made_policy=1; fi
  # Another apt-get (a second install started at the same time) holds dpkg's lock: wait for it, do not fail.
  local apt=(apt-get -o DPkg::Lock::Timeout=600)
  if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends $missing >"$STATE.apt.log" 2>&1
  then
    "${apt[@]}" update -qq >>"$STATE.apt.log" 2>&1
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends $missing >>"$STATE.apt.log" 2>&1 \
      || { ((made_policy)) && rm -f "$policy"; die "apt-get install failed, see $STATE.apt.log"; }
  fi
  ((made_policy)) && rm -f "$policy"
  echo "installed ${missing}"
}

write_configs() {
  local etc=$STATE/etc node cpus mem
  mkdir -p "$etc" "$STATE"/{run,log,ctld,spool,munge,mysql}
  chmod 700 "$STATE/munge"
  [[ -s $STATE/munge/munge.key ]] || { mungekey --create --keyfile="$STATE/munge/munge.key" >/dev/null 2>&1 ||
    dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none; }
  chmod 400 "$STATE/munge/munge.key"
  [[ -s $STATE/db.pass ]] || (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$STATE/db.pass")
  node=$(slurmd -C | head -1)  # NodeName=... CPUs=... RealMemory=...
  cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$node")
  mem=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$node")
  mem=$((mem * 9 / 10))  # headroom: a node reporting less memory than configured is drained
  local overrides=""
  if [[ -n ${LRA_SLURM_CPUS:-} && $LRA_SLURM_CPUS != "$cpus" ]]; then  # more job slots than cores (tests)
    cpus=$LRA_SLURM_CPUS overrides="SlurmdParameters=config_overrides"
  fi
  local auth="socket=$STATE/munge/munge.socket,cred_expire=10"
  cat >"$etc/slurm.conf" <<EOF
# Written by scripts/slurm_local.sh: a one-node cluster with accounting (slurmdbd), state under $STATE
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=$auth
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$(pidfile slurmctld)
SlurmdPidFile=$(pidfile slurmd)
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$((mem / cpus))
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$STATE/munge/munge.socket
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
$overrides
MinJobAge=30
KillWait=10
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  (umask 077; cat >"$etc/slurmdbd.conf" <<EOF
# Written by scripts/slurm_local.sh
AuthType=auth/munge
AuthInfo=$auth
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$(pidfile slurmdbd)
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$(cat "$STATE/db.pass")
StorageLoc=slurm_acct_db
EOF
  )
  chmod 600 "$etc/slurmdbd.conf"
}

start_mariadb() {
  local data=$STATE/mysql/data sock=$STATE/mysql/mysqld.sock fresh=0
  if [[ ! -d $data/mysql ]]; then
    mariadb-install-db --no-defaults --user=root --datadir="$data" --auth-root-authentication-method=socket \
      --skip-test-db >"$STATE/log/mariadb-install.log" 2>&1 || die "mariadb-install-db failed: $STATE/log/mariadb-install.log"
    fresh=1
  fi
  if ! running mariadbd; then
    mariadbd --no-defaults --user=root --datadir="$data" --socket="$sock" --port="$DB_PORT" --bind-address=127.0.0.1 \
      --pid-file="$(pidfile mariadbd)" --log-error="$STATE/log/mariadb.log" --skip-log-bin \
      --innodb-buffer-pool-size=32M --performance-schema=OFF >/dev/null 2>&1 </dev/null &
    disown
    wait_for 60 MariaDB mariadb --no-defaults --socket="$sock" -e "SELECT 1"
  fi
  if ((fresh)) || [[ ! -e $STATE/mysql/.user ]]; then
    local pass; pass=$(cat "$STATE/db.pass")
    mariadb --no-defaults --socket="$sock" -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
      CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pass';
      GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';" \
      || die "could not create the slurm database user"
    touch "$STATE/mysql/.user"
  fi
}

cmd_start() {
  [[ $(id -u) == 0 ]] || die "the local cluster runs its daemons as root (SlurmUser=root): run as root"
  [[ -z $(missing_packages) ]] || die "missing Debian packages: $(missing_packages) (run: $0 install)"
  write_configs
  export SLURM_CONF=$STATE/etc/slurm.conf
  if ! running munged; then
    munged --force --key-file="$STATE/munge/munge.key" --socket="$STATE/munge/munge.socket" \
      --pid-file="$(pidfile munged)" --log-file="$STATE/log/munged.log" --seed-file="$STATE/munge/munged.seed" \
      </dev/null || die "munged did not start: $STATE/log/munged.log"
  fi
  wait_for 20 munged munge --socket="$STATE/munge/munge.socket" -n
  start_mariadb
  if ! running slurmdbd; then
    slurmdbd </dev/null || die "slurmdbd did not start: $STATE/log/slurmdbd.log"
  fi
  wait_for 60 slurmdbd sacctmgr -n list cluster
  sacctmgr -n list cluster format=cluster | grep -qw "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
  if ! running slurmctld; then
    slurmctld </dev/null || die "slurmctld did not start: $STATE/log/slurmctld.log"
  fi
  wait_for 30 slurmctld scontrol ping
  if ! running slurmd; then
    slurmd </dev/null || die "slurmd did not start: $STATE/log/slurmd.log"
  fi
  local end=$((SECONDS + 60))
  until sinfo -h -n "$HOST" -o %t 2>/dev/null | grep -Eq '^(idle|mix|alloc)'; do
    ((SECONDS < end)) || die "node $HOST not idle after 60s: $(sinfo -h -o '%t %E' 2>&1) (logs: $STATE/log)"
    if sinfo -h -n "$HOST" -o %t 2>/dev/null | grep -Eq '^(down|drain)'; then
      scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true
    fi
    sleep 0.3
  done
  echo "slurm up: SLURM_CONF=$SLURM_CONF (state $STATE)"
}

tree() {  # tree PID: the pid and all its descendants
  local child
  echo "$1"
  for child in $(pgrep -P "$1" 2>/dev/null); do tree "$child"; done
}

stop_daemons() {  # stop_daemons NAME...: SIGTERM by pid file, wait (SIGKILL after 30 s), remove the pid files
  local name pid f pids=()
  for name in "$@"; do
    f=$(pidfile "$name")
    if running "$name"; then pids+=("$name:$(cat "$f")"); kill -TERM "$(cat "$f")" 2>/dev/null || true; fi
    rm -f "$f"
  done
  for entry in "${pids[@]}"; do
    name=${entry%%:*} pid=${entry#*:}
    for _ in $(seq 300); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then echo "$name (pid $pid) ignored SIGTERM for 30s: SIGKILL" >&2; kill -KILL "$pid"; fi
    echo "stopped $name (pid $pid)"
  done
}

cmd_stop() {
  local pid conf=$STATE/etc/slurm.conf
  if running slurmctld && running slurmd; then  # end the jobs first: their steps would outlive slurmd
    local jobs; jobs=$(SLURM_CONF=$conf squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
    if [[ -n ${jobs// } ]]; then
      echo "cancelling jobs $jobs"
      SLURM_CONF=$conf scancel $jobs 2>/dev/null || true
      for _ in $(seq 100); do [[ -z $(SLURM_CONF=$conf squeue -h -o %A 2>/dev/null) ]] && break; sleep 0.2; done
    fi
  fi
  stop_daemons slurmd slurmctld  # in waves: the controllers, then accounting, then what accounting needs
  stop_daemons slurmdbd
  stop_daemons mariadbd munged
  for pid in $(pgrep -x slurmstepd 2>/dev/null); do  # steps of this cluster left behind (slurmd gone): kill them
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$conf" || continue
    echo "killing the job step $pid left behind, and its processes"
    kill -KILL $(tree "$pid") 2>/dev/null || true
  done
}

cmd_status() {
  local name rc=0
  for name in "${DAEMONS[@]}"; do
    if running "$name"; then echo "$name: running (pid $(cat "$(pidfile "$name")"))"; else echo "$name: stopped"; rc=3; fi
  done
  ((rc == 0)) && SLURM_CONF=$STATE/etc/slurm.conf sinfo
  return $rc
}

case ${1:-} in
  install) mkdir -p "$(dirname "$STATE")"; cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) echo "export SLURM_CONF=$STATE/etc/slurm.conf" ;;
  *) echo "usage: $0 install|start|stop|status|env   (state folder: $STATE)" >&2; exit 2 ;;
esac
