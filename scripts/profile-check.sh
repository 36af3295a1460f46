#!/bin/bash
# profile-check.sh [HOSTS]: where a fleet check's host CPU goes, by
# command. Runs `make bench-fleet`'s harness for HOSTS (default 1) real
# sshd endpoints, pgtune only, and meanwhile counts, with bpftrace, the
# CPU time of every process that ends while a pgtune process runs: the
# sshd sessions, shells, sudo, postgres -C and the rest, one line per
# command name, per host. Root; needs bpftrace (apt-get install bpftrace)
# and tracefs. A quiet machine is assumed: whatever else ends meanwhile
# counts too. Counts (processes per host) are exact; CPU times on a VM
# spread by ±15 % from run to run.
set -euo pipefail
hosts=${1:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/pgtune-profile.XXXXXX)
trap 'rm -rf -- "$work"' EXIT
command -v bpftrace >/dev/null || { echo "profile-check: bpftrace is not installed (apt-get install bpftrace)" >&2; exit 1; }
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true

cd "$root"
make -s build
go test -c -tags benchfleet -o "$work/bf.test" ./internal/benchfleet

# sched_process_exit of the thread group leader: the process's own CPU
# (a forked subshell's included), under its last command name.
cat > "$work/exits.bt" <<'EOF'
tracepoint:sched:sched_process_exec /comm == "pgtune"/ { @on = 1; }
tracepoint:sched:sched_process_exit /comm == "pgtune" && pid == tid/ { @on = 0; }
tracepoint:sched:sched_process_exit /@on == 1 && pid == tid && comm != "pgtune"/ {
  @ns[comm] = sum(curtask->se.sum_exec_runtime); @n[comm] = count();
}
EOF
bpftrace "$work/exits.bt" > "$work/trace" 2>"$work/bpftrace.err" &
bt=$!
# bpftrace prints "Attaching" once its probes are in place.
for _ in $(seq 100); do grep -q Attaching "$work/trace" "$work/bpftrace.err" 2>/dev/null && break; sleep 0.1; done

(cd internal/benchfleet && BENCH_FLEET_SIZES=$hosts BENCH_FLEET_ANSIBLE=0 BENCH_FLEET_REPLAY=0 \
  BENCH_FLEET_OUT="$work/fleet.md" PGTUNE_BIN="$root/bin/pgtune" \
  "$work/bf.test" -test.run '^$' -test.bench FleetCheck -test.benchtime 1x >"$work/bench.log" 2>&1) ||
  { kill -INT "$bt"; cat "$work/bench.log" >&2; exit 1; }
kill -INT "$bt"
wait "$bt" || true

grep -A1 '^tool' "$work/fleet.md" | head -2
echo
awk -v hosts="$hosts" '
  /^@n\[/  { k = substr($1, 4, length($1) - 5); n[k] = $2 }
  /^@ns\[/ { k = substr($1, 5, length($1) - 6); ns[k] = $2 }
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
