#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for testing the workflow's cluster path for real.
#   tests/slurm/cluster.sh start    install slurm-wlm + munge (Debian) if needed, write
#                                   /etc/slurm/slurm.conf for this host, start munged,
#                                   slurmctld and slurmd, wait until the node is idle
#   tests/slurm/cluster.sh stop     stop the daemons this script started
#   tests/slurm/cluster.sh status   exit 0 if the node answers and is idle
# Idempotent: `start` on a running cluster only checks it. Needs root (exit 2 otherwise).
# No accounting (no slurmdbd): Snakemake's plugin must use `--slurm-status-command squeue`,
# and MinJobAge is high so that finished jobs stay visible to squeue and scontrol.
set -euo pipefail

STATE=/var/spool/reluinit-slurm
LOGS=/var/log/slurm
CONF=/etc/slurm/slurm.conf

die() { echo "cluster.sh: $*" >&2; exit 2; }

idle() { [ "$(sinfo -h -o %t 2>/dev/null | head -n1)" = "idle" ]; }

install_packages() {
  command -v slurmctld >/dev/null && command -v munged >/dev/null && return 0
  command -v apt-get >/dev/null || die "slurm-wlm is not installed and apt-get is not available"
  export DEBIAN_FRONTEND=noninteractive
  apt_install() { apt-get install -y -qq -o DPkg::Lock::Timeout=300 slurm-wlm munge >/dev/null; }
  apt_install || { apt-get update -qq -o DPkg::Lock::Timeout=300 >/dev/null && apt_install; } \
    || die "could not install slurm-wlm and munge from Debian's packages"
}

write_conf() {
  local node
  node=$(slurmd -C | head -n1)   # NodeName=<host> CPUs=... RealMemory=...: this machine as it is
  mkdir -p /etc/slurm "$STATE/ctld" "$STATE/d" "$LOGS"
  cat > "$CONF" <<CONF
# Written by tests/slurm/cluster.sh: one node, this host, no accounting.
ClusterName=reluinit
SlurmctldHost=$(hostname -s)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=3600
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
$node State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
}

start() {
  [ "$(id -u)" = 0 ] || die "must run as root"
  if idle; then echo "cluster already up"; return 0; fi
  install_packages
  write_conf
  mkdir -p /run/munge && chown munge:munge /run/munge
  # Start only what is not running, and remember what we started: `stop` stops only that.
  if ! pgrep -x munged >/dev/null; then
    runuser -u munge -- munged && touch "$STATE/started-munged"
  fi
  # A fresh start forgets jobs left by an interrupted earlier run (-c, and an empty spool):
  # otherwise the node comes back PLANNED, waiting for jobs that no longer exist.
  if ! pgrep -x slurmctld >/dev/null; then
    rm -rf "${STATE:?}/ctld/"*
    slurmctld -c -i && touch "$STATE/started-slurmctld"
  fi
  if ! pgrep -x slurmd >/dev/null; then
    rm -rf "${STATE:?}/d/"*
    slurmd && touch "$STATE/started-slurmd"
  fi
  for _ in $(seq 60); do
    if idle; then echo "cluster up: $(sinfo -h -o '%N %c CPUs %m MB %t')"; return 0; fi
    # A node that came back from an earlier run may be marked down; resume it.
    scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1 || true
    sleep 1
  done
  tail -n 20 "$LOGS/slurmctld.log" "$LOGS/slurmd.log" >&2 || true
  die "the node did not become idle within 60 s"
}

stop() {
  local started=()
  for daemon in slurmd slurmctld munged; do
    if [ -e "$STATE/started-$daemon" ]; then
      pkill -x "$daemon" 2>/dev/null || true
      rm -f "$STATE/started-$daemon"
      started+=("$daemon")
    fi
  done
  for _ in $(seq 20); do
    local running=0
    for daemon in "${started[@]}"; do pgrep -x "$daemon" >/dev/null && running=1; done
    if [ "$running" = 0 ]; then echo "cluster stopped (${started[*]:-nothing this script started})"; return 0; fi
    sleep 0.5
  done
  die "daemons still running after 10 s: ${started[*]}"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) idle ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 64 ;;
esac
