#!/bin/bash
# Runs as root inside a box (piped over ssh): prints what the kernel, the sysctl.d
# files and the postmaster say about the memory policy, one key=value a line.
set -u
mi() { awk -v k="$1:" '$1==k {print $2}' /proc/meminfo; }
conf() { # file key -> value or "missing"
	[ -f "$1" ] || { echo missing; return; }
	awk -F= -v k="$2" '{gsub(/[ \t]/,"",$1); gsub(/[ \t]/,"",$2)} $1==k {v=$2} END {print (v==""?"missing":v)}' "$1"
}
echo "hostname=$(hostname)"
echo "mem_total_kb=$(mi MemTotal)"
echo "hugepagesize_kb=$(mi Hugepagesize)"
echo "hugepages_total=$(mi HugePages_Total)"
echo "hugepages_free=$(mi HugePages_Free)"
echo "commit_limit_kb=$(mi CommitLimit)"
echo "nr_hugepages=$(cat /proc/sys/vm/nr_hugepages)"
echo "nr_hugepages_conf=$(conf /etc/sysctl.d/10-hugepages.conf vm.nr_hugepages)"
echo "overcommit_memory=$(cat /proc/sys/vm/overcommit_memory)"
echo "overcommit_kbytes=$(cat /proc/sys/vm/overcommit_kbytes)"
echo "overcommit_ratio=$(cat /proc/sys/vm/overcommit_ratio)"
echo "overcommit_memory_conf=$(conf /etc/sysctl.d/99-overcommit.conf vm.overcommit_memory)"
echo "overcommit_kbytes_conf=$(conf /etc/sysctl.d/99-overcommit.conf vm.overcommit_kbytes)"
pidfile=/var/lib/postgresql/15/main/postmaster.pid
if [ -r "$pidfile" ] && pid=$(head -1 "$pidfile") && [ -d "/proc/$pid" ]; then
	echo "postmaster_pid=$pid"
	echo "postmaster_hugetlb_kb=$(awk '$1=="HugetlbPages:" {print $2}' "/proc/$pid/status")"
	echo "pg_huge_pages=$(runuser -u postgres -- psql -XAtq -c 'SHOW huge_pages')"
	echo "pg_shared_buffers=$(runuser -u postgres -- psql -XAtq -c 'SHOW shared_buffers')"
	echo "pg_shared_memory_size=$(runuser -u postgres -- psql -XAtq -c 'SHOW shared_memory_size')"
else
	echo "postmaster_pid=none"
fi
echo "postgresql_active=$(systemctl is-active postgresql@15-main.service)"
