#!/bin/bash
# Runs as root inside a box (piped over ssh): prints what the kernel, the
# tmpfiles.d file and the postmaster say about 1 GiB and 2 MiB huge pages, one
# key=value a line.
set -u
g=/sys/kernel/mm/hugepages/hugepages-1048576kB
m=/sys/kernel/mm/hugepages/hugepages-2048kB
tf=/etc/tmpfiles.d/pgtune-hugepages.conf
echo "cpu_pdpe1gb=$(grep -qw pdpe1gb /proc/cpuinfo && echo yes || echo no)"
echo "sizes=$(ls /sys/kernel/mm/hugepages | tr '\n' ' ')"
for f in nr_hugepages free_hugepages resv_hugepages surplus_hugepages; do
	echo "gig_$f=$(cat "$g/$f" 2>/dev/null || echo none)"
	echo "mib2_$f=$(cat "$m/$f" 2>/dev/null || echo none)"
done
if [ -f "$tf" ]; then echo "tmpfiles=$(grep '^w ' "$tf")"; else echo "tmpfiles=absent"; fi
echo "sysctl_conf=$(grep -h '^vm.nr_hugepages' /etc/sysctl.d/10-hugepages.conf 2>/dev/null | tr -d ' ')"
pidfile=/var/lib/postgresql/15/main/postmaster.pid
if [ -r "$pidfile" ] && pid=$(head -1 "$pidfile") && [ -d "/proc/$pid" ]; then
	echo "postmaster_pid=$pid"
	# The shared memory segment's mapping: its page size and size.
	echo "smaps_1g_kb=$(awk '/^KernelPageSize:/ {ps=$2} /^Size:/ {sz=$2} /^KernelPageSize: *1048576 kB/ {t+=sz} END {print t+0}' "/proc/$pid/smaps")"
	echo "smaps_2m_kb=$(awk '/^Size:/ {sz=$2} /^KernelPageSize: *2048 kB/ {t+=sz} END {print t+0}' "/proc/$pid/smaps")"
	echo "hugetlb_kb=$(awk '$1=="HugetlbPages:" {print $2}' "/proc/$pid/status")"
	q() { runuser -u postgres -- /usr/lib/postgresql/15/bin/psql -XAtq -c "$1"; }
	echo "pg_huge_pages=$(q 'SHOW huge_pages')"
	echo "pg_huge_page_size=$(q 'SHOW huge_page_size')"
	echo "pg_shared_buffers=$(q 'SHOW shared_buffers')"
	echo "pg_shared_memory_size=$(q 'SHOW shared_memory_size')"
else
	echo "postmaster_pid=none"
fi
echo "unit_active=$(systemctl is-active postgresql@15-main.service)"
# Boot order: when tmpfiles wrote the pool, and when the server started
# (monotonic microseconds since boot).
echo "tmpfiles_setup_done_us=$(systemctl show -p ExecMainExitTimestampMonotonic --value systemd-tmpfiles-setup.service)"
echo "postgres_start_us=$(systemctl show -p ExecMainStartTimestampMonotonic --value postgresql@15-main.service)"
