#!/bin/bash
# The seed experiment, run as root INSIDE a testbed box (never on a real host):
# IDLE idle sessions held open, a prober opening a new connection every 0.3 s, and
# loader sessions added one by one, each building and holding ~1/10 of RAM in a
# PL/pgSQL array, until one of them fails (error or killed) or MAX are running.
# Writes $OUT/result.json with what happened. Usage: oom-experiment.sh LABEL
set -u
label=$1
out=/var/lib/oomexp/$label
IDLE=${IDLE:-20}
MAX=${MAX_SESSIONS:-30}
STEP=${STEP:-5}
HOLD=${HOLD:-1800}
SETTLE=${SETTLE:-40}
pglog=/var/log/postgresql/postgresql-15-main.log

rm -rf "$out"; mkdir -p "$out"; chmod 777 "$out"; cd "$out"
now() { date +%s.%N; }
ev() { echo "$(now) $*" >>events.log; }
# The real binary, not Debian's perl wrapper: its start-up alone takes seconds under TCG.
PSQL=/usr/lib/postgresql/15/bin/psql
pg() { runuser -u postgres -- env PGAPPNAME="$1" "$PSQL" -XAtq "${@:2}"; }

memkb=$(awk '$1=="MemTotal:"{print $2}' /proc/meminfo)
rows=$(( memkb * 1024 / 10 / 1000 ))   # 1000-byte strings: ~1/10 of RAM
log0=$(stat -c %s "$pglog")
oom0=$(dmesg | grep -c 'Out of memory: Killed process')
t0=$(now)
ev "start label=$label memtotal_kb=$memkb rows=$rows overcommit_memory=$(cat /proc/sys/vm/overcommit_memory) overcommit_kbytes=$(cat /proc/sys/vm/overcommit_kbytes)"

# Memory sampler: commit charge against the limit, and what is physically left.
( while [ ! -e stop ]; do
	awk -v t="$(now)" '/^(Committed_AS|CommitLimit|MemAvailable|MemFree):/ {v[$1]=$2}
		END {print t, v["Committed_AS:"], v["CommitLimit:"], v["MemAvailable:"], v["MemFree:"]}' /proc/meminfo >>mem.log
	sleep 1
done ) &

# Idle bystanders: each reports its backend pid, then holds its connection open.
for i in $(seq 1 "$IDLE"); do
	( echo 'select pg_backend_pid();'; sleep "$HOLD" ) | pg exp-idle >"idle.$i.out" 2>&1 &
done
sleep 5

# Prober: a fresh connection every 0.3 s, as a client checking the server is up.
( while [ ! -e stop ]; do
	t=$(now)
	if timeout 10 runuser -u postgres -- "$PSQL" -XAtq -c 'select 1' >/dev/null 2>>probe.err; then r=ok; else r=fail; fi
	echo "$t $r" >>probe.log
	sleep 0.3
done ) &
sleep 3

declare -a lpids
ended=""
for n in $(seq 1 "$MAX"); do
	pg exp-load -v ON_ERROR_STOP=1 -c "DO \$\$ DECLARE a text[]; BEGIN
		SELECT array_agg(repeat('x', 1000)) INTO a FROM generate_series(1, $rows) g;
		RAISE NOTICE 'holding % rows', array_length(a, 1);
		PERFORM pg_sleep($HOLD);
	END \$\$" >"load.$n.out" 2>&1 &
	lpids[n]=$!
	ev "load $n started"
	for _ in $(seq 1 "$STEP"); do
		sleep 1
		for m in "${!lpids[@]}"; do
			if ! kill -0 "${lpids[m]}" 2>/dev/null; then ended="load $m exited: $(tr '\n' ' ' <"load.$m.out" | cut -c1-300)"; break; fi
		done
		[ -n "$ended" ] && break
		if tail -c +"$((log0 + 1))" "$pglog" | grep -q 'terminating any other active server processes'; then
			ended="postmaster crash-restart"; break
		fi
	done
	[ -n "$ended" ] && break
done
sessions=$n
ev "stopped adding after $sessions loaders: ${ended:-max reached}"
t_end=$(now)

# Let the outage (if any) play out and the server recover while the prober runs.
sleep "$SETTLE"
for _ in $(seq 1 60); do tail -1 probe.log | grep -q ' ok$' && break; sleep 2; done

alive=0
for i in $(seq 1 "$IDLE"); do
	p=$(head -1 "idle.$i.out" | grep -E '^[0-9]+$' || true)
	[ -n "$p" ] && [ "$(pg exp-check -c "select count(*) from pg_stat_activity where pid = $p")" = 1 ] && alive=$((alive + 1))
done
touch stop
pg exp-check -c "select count(pg_terminate_backend(pid)) from pg_stat_activity where application_name in ('exp-load','exp-idle')" >/dev/null 2>&1
sleep 2
kill $(jobs -p) 2>/dev/null
wait 2>/dev/null

recovered=false
tail -1 probe.log | grep -q ' ok$' && recovered=true
# systemd's default OOMPolicy=stop may stop the whole unit after a kernel OOM kill.
service="$(systemctl show -p ActiveState --value postgresql@15-main.service)/$(systemctl show -p Result --value postgresql@15-main.service)"
newlog=$(tail -c +"$((log0 + 1))" "$pglog")
oom_kills=$(( $(dmesg | grep -c 'Out of memory: Killed process') - oom0 ))
victims=$(dmesg | grep 'Out of memory: Killed process' | tail -n "$oom_kills" | sed 's/^\[[^]]*\] //' | head -5)
restarted=false
grep -q 'all server processes terminated; reinitializing' <<<"$newlog" && restarted=true
oom_errors=$(grep -c 'ERROR:  out of memory' <<<"$newlog")
probe_total=$(wc -l <probe.log)
probe_fail=$(grep -c ' fail$' probe.log)
outage=$(awk '$2=="fail" && !f {f=$1} $2=="fail" {last=$1; s=""} $2=="ok" && last!="" && s=="" {s=$1}
	END {if (f=="") print 0; else {e=(s==""?last+0.3:s); printf "%.1f", e-f}}' probe.log)
peak=$(awk 'BEGIN{m=0} $2>m {m=$2} END{print m}' mem.log)
limit=$(awk '{l=$3} END{print l}' mem.log)
minavail=$(awk 'NR==1 || $4<m {m=$4} END{print m}' mem.log)
# One JSON string from text: lines joined with " | ", quotes and backslashes escaped.
json_str() { local s; s=$(tr '\n\t' '| ' | sed 's/|/ | /g'); s=${s//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"\n' "$s"; }
cat >result.json <<JSON
{"label": "$label", "oom_kills": $oom_kills, "postmaster_restarted": $restarted,
 "sessions_dropped": $(( IDLE - alive )), "idle_sessions": $IDLE,
 "probe_failures": $probe_fail, "probes": $probe_total, "outage_seconds": $outage,
 "oom_errors": $oom_errors, "server_recovered": $recovered, "postgres_unit_after": "$service", "loader_sessions": $sessions, "rows_per_loader": $rows,
 "seconds_to_stop": $(awk -v a="$t0" -v b="$t_end" 'BEGIN{printf "%.1f", b-a}'),
 "stop_reason": $(printf '%s' "${ended:-max reached}" | json_str),
 "mem_total_kb": $memkb, "commit_limit_kb": $limit, "peak_committed_as_kb": $peak,
 "min_mem_available_kb": $minavail,
 "overcommit_memory": $(cat /proc/sys/vm/overcommit_memory), "overcommit_kbytes": $(cat /proc/sys/vm/overcommit_kbytes),
 "oom_victims": $(printf '%s' "$victims" | json_str)}
JSON
ev "done"
cat result.json
