#!/bin/bash
# profile-check.sh [HOSTS]: where a fleet check's host CPU goes, by
# command. Runs `make bench-fleet`'s harness for HOSTS (default 1) real
# sshd endpoints, pgtune only, and meanwhile counts, with bpftrace, the
# CPU time of every process the endpoints' sshd processes start once
# pgtune runs (connections, sessions, shells, sudo, postgres -C and the
# rest, every descendant), one line per command name, per host: what the
# bench's "hosts CPU" column measures, split up. Not counted, as there:
# the cluster's backend that serves the topology query (the postmaster
# forks it). Root; needs bpftrace (apt-get install bpftrace) and
# tracefs. Counts (processes per host) are exact; CPU times on a VM
# spread by ±15 % from run to run. PGTUNE_BIN profiles another binary
# (default: bin/pgtune, built first).
set -euo pipefail
hosts=${1:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/pgtune-profile.XXXXXX)
bt=
trap '[ -z "$bt" ] || kill "$bt" 2>/dev/null || :; rm -rf -- "$work"' EXIT
command -v bpftrace >/dev/null || { echo "profile-check: bpftrace is not installed (apt-get install bpftrace)" >&2; exit 1; }
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || :

cd "$root"
bin=${PGTUNE_BIN:-}
if [ -z "$bin" ]; then make -s build; bin=$root/bin/pgtune; fi
go test -c -tags benchfleet -o "$work/bf.test" ./internal/benchfleet

# In scope: what a process named sshd forks once pgtune runs (the
# listeners' connections; the readiness probes before do not count), and
# all that those fork in turn. Each counts when it ends (its own CPU, a
# forked subshell's included, under its last command name), also after
# pgtune ends (a connection's sshd outlives it a little); counting ends
# with the bench's own process (not the copies of it the bench runs as
# helpers).
cat > "$work/exits.bt" <<'BT'
tracepoint:sched:sched_process_exec /comm == "pgtune"/ { @on = 1; }
tracepoint:sched:sched_process_fork /@on == 1 && (comm == "sshd" || @scope[pid] == 1)/ { @scope[args->child_pid] = 1; }
tracepoint:sched:sched_process_exit /pid == tid && @scope[pid] == 1/ {
  @ns[comm] = sum(curtask->se.sum_exec_runtime); @n[comm] = count(); delete(@scope[pid]);
}
tracepoint:sched:sched_process_exit /pid == tid && comm == "bf.test" && curtask->real_parent->comm != "bf.test"/ { clear(@scope); exit(); }
BT
bpftrace "$work/exits.bt" > "$work/trace" 2>"$work/bpftrace.err" &
bt=$!
# bpftrace prints "Attaching" once its probes are in place.
for _ in $(seq 200); do grep -q Attaching "$work/trace" 2>/dev/null && break; sleep 0.1; done
if ! grep -q Attaching "$work/trace" || ! kill -0 "$bt" 2>/dev/null; then
  echo "profile-check: bpftrace did not start:" >&2
  cat "$work/bpftrace.err" "$work/trace" >&2
  exit 1
fi

if ! (cd internal/benchfleet && env -u PGTUNE_BIN_BEFORE BENCH_FLEET_SIZES="$hosts" BENCH_FLEET_ANSIBLE=0 BENCH_FLEET_REPLAY=0 \
  BENCH_FLEET_OUT="$work/fleet.md" PGTUNE_BIN="$bin" \
  "$work/bf.test" -test.run '^$' -test.bench FleetCheck -test.benchtime 1x >"$work/bench.log" 2>&1); then
  cat "$work/bench.log" >&2
  exit 1
fi
wait "$bt" || :
bt=

grep -A1 '^tool' "$work/fleet.md" | head -2
echo
awk -v hosts="$hosts" '
  /^@n\[.*\]: [0-9]+$/  { k = substr($0, 4); sub(/\]: [0-9]+$/, "", k); n[k] = $NF }
  /^@ns\[.*\]: [0-9]+$/ { k = substr($0, 5); sub(/\]: [0-9]+$/, "", k); ns[k] = $NF }
  END {
    printf "%-16s %9s %9s %11s\n", "command", "per host", "ms each", "ms per host"
    for (k in ns) { tot += ns[k]; cnt += n[k] }
    # sorted by CPU, largest first
    while (1) {
      best = ""; for (k in ns) if (best == "" || ns[k] > ns[best]) best = k
      if (best == "") break
      printf "%-16s %9.1f %9.2f %11.1f\n", best, n[best] / hosts, ns[best] / n[best] / 1e6, ns[best] / hosts / 1e6
      delete ns[best]
    }
    printf "%-16s %9.1f %9s %11.1f\n", "all", cnt / hosts, "", tot / hosts / 1e6
  }' "$work/trace"
