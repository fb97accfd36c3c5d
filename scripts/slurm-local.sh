#!/usr/bin/env bash
# A real one-node Slurm on this machine, for the Slurm executor's tests (docs/slurm.md).
#
# Installs Debian's slurm-wlm and munge when missing, writes a one-node slurm.conf (this host
# is the controller and the compute node, with its real CPU count and memory, and four fake
# GPUs through gres.conf: AutoDetect=off, File= lines pointing at device nodes made here), makes
# the munge key, starts munged, slurmctld and slurmd, and waits until `sinfo` shows the node
# idle. Idempotent: a second run with the same config and live daemons changes nothing; a
# changed config restarts the daemons. Needs root. Exit 0 when Slurm answers, 1 otherwise.
#
# One partition, `debug`. Accounts are checked at submission by a job_submit.lua that knows
# `aorta-team` (and no account), so a refused account is tested without slurmdbd. There is no accounting database
# (AccountingStorageType=none): `sacct` does not work here; finished jobs stay visible to
# `squeue`/`scontrol` for MinJobAge seconds, which the executor reads first.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
  echo "slurm-local: not root; cannot install or start Slurm" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq slurm-wlm munge >/dev/null
fi

HOST="$(hostname -s)"
CPUS="$(nproc --all)"
MEM_MB="$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)"
CONF_DIR=/etc/slurm
STATE=/var/lib/aorta-slurm
FAKE_GPU_DIR="$STATE/fake-gpus"
NGPU=4

mkdir -p "$CONF_DIR" "$STATE/ctld" "$STATE/d" "$FAKE_GPU_DIR" /var/log/slurm /run/slurm
chown slurm:slurm "$STATE/ctld" /var/log/slurm /run/slurm
for i in $(seq 0 $((NGPU - 1))); do
  # Slurm wants a character device: a node like /dev/null's (1:3), one per fake GPU
  [ -c "$FAKE_GPU_DIR/gpu$i" ] || { rm -f "$FAKE_GPU_DIR/gpu$i"; mknod -m 0666 "$FAKE_GPU_DIR/gpu$i" c 1 3; }
done

new_conf="$(mktemp)"
new_gres="$(mktemp)"
new_lua="$(mktemp)"
trap 'rm -f "$new_conf" "$new_gres" "$new_lua"' EXIT
cat >"$new_lua" <<'EOF'
-- written by aorta-tui scripts/slurm-local.sh: the accounts this test cluster knows
local known = { [""] = true, ["aorta-team"] = true }
function slurm_job_submit(job_desc, part_list, submit_uid)
  local acct = job_desc.account or ""
  if not known[acct] then
    slurm.log_user("account " .. acct .. " is not known to this cluster")
    return slurm.ESLURM_INVALID_ACCOUNT
  end
  return slurm.SUCCESS
end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
EOF
cat >"$new_conf" <<EOF
# written by aorta-tui scripts/slurm-local.sh: one node, controller and compute on $HOST
ClusterName=aorta-local
SlurmctldHost=$HOST
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
# no cgroups (containers and gVisor often lack a usable hierarchy for slurmd)
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
MinJobAge=600
KillWait=5
SchedulerParameters=sched_min_interval=0,batch_sched_delay=0
MessageTimeout=20
MpiDefault=none
# refuse a job its partition cannot run (a wrong account) at sbatch time, not as PENDING forever
EnforcePartLimits=ALL
# accounts checked at submission as slurmdbd would (there is none here): job_submit.lua
JobSubmitPlugins=lua
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:$NGPU State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
{
  echo "# written by aorta-tui scripts/slurm-local.sh: fake GPUs (plain files), no autodetection"
  echo "AutoDetect=off"
  for i in $(seq 0 $((NGPU - 1))); do
    echo "NodeName=$HOST Name=gpu File=$FAKE_GPU_DIR/gpu$i"
  done
} >"$new_gres"

changed=0
for pair in "$new_conf:$CONF_DIR/slurm.conf" "$new_gres:$CONF_DIR/gres.conf" "$new_lua:$CONF_DIR/job_submit.lua"; do
  src="${pair%%:*}" dst="${pair#*:}"
  if ! cmp -s "$src" "$dst" 2>/dev/null; then
    install -m 0644 "$src" "$dst"
    changed=1
  fi
done

# munge: a key once, the daemon when not running
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
mkdir -p /run/munge && chown munge:munge /run/munge && chmod 0755 /run/munge
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if ! alive /run/munge/munged.pid; then
  runuser -u munge -- /usr/sbin/munged
fi
for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done

stop_daemon() {  # by the pid in its pid file only
  local pidfile="$1"
  if alive "$pidfile"; then
    kill "$(cat "$pidfile")"
    for _ in $(seq 100); do alive "$pidfile" || break; sleep 0.1; done
  fi
}
if [ "$changed" = 1 ]; then
  stop_daemon /run/slurm/slurmd.pid
  stop_daemon /run/slurm/slurmctld.pid
fi
alive /run/slurm/slurmctld.pid || /usr/sbin/slurmctld
alive /run/slurm/slurmd.pid || /usr/sbin/slurmd

# wait for the node to be idle (or mixed/allocated: jobs of an earlier run)
for _ in $(seq 120); do
  state="$(sinfo -h -N -n "$HOST" -o '%t' 2>/dev/null | head -1 || true)"
  case "$state" in
    idle|mix|alloc) echo "slurm-local: node $HOST is $state ($CPUS CPUs, $NGPU fake GPUs)"; exit 0 ;;
    down*|drain*|unk*) scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true ;;
  esac
  sleep 0.5
done
echo "slurm-local: the node never became idle; sinfo says:" >&2
sinfo -N -l >&2 || true
tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
exit 1
