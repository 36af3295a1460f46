#!/bin/bash
# Runs as root inside a box (piped over ssh): prints what systemd and /proc say
# about the OOM shield of the main cluster, one key=value a line.
set -u
unit=postgresql@15-main.service
dropin=/etc/systemd/system/$unit.d/pgtune-oom.conf
echo "unit_active=$(systemctl is-active "$unit")"
echo "unit_oom_policy=$(systemctl show -p OOMPolicy --value "$unit")"
echo "unit_oom_score_adjust=$(systemctl show -p OOMScoreAdjust --value "$unit")"
echo "unit_dropins=$(systemctl show -p DropInPaths --value "$unit")"
if [ -f "$dropin" ]; then echo "dropin=present"; else echo "dropin=absent"; fi
pidfile=/var/lib/postgresql/15/main/postmaster.pid
if [ -r "$pidfile" ] && pid=$(head -1 "$pidfile") && [ -d "/proc/$pid" ]; then
	echo "postmaster_pid=$pid"
	echo "postmaster_oom_score_adj=$(cat "/proc/$pid/oom_score_adj")"
	echo "unit_main_pid=$(systemctl show -p MainPID --value "$unit")"
	# The postmaster's children now (checkpointer, walwriter, ...): pid:adj.
	kids=""
	for c in $(pgrep -P "$pid"); do kids="$kids $c:$(cat "/proc/$c/oom_score_adj" 2>/dev/null)"; done
	echo "children_oom_score_adj=${kids# }"
	# A client backend, forked for this query, reads its own value.
	echo "backend_oom_score_adj=$(runuser -u postgres -- /usr/lib/postgresql/15/bin/psql -XAtq \
		-c "select trim(pg_read_file('/proc/' || pg_backend_pid() || '/oom_score_adj'))")"
	echo "postmaster_environ_adjust=$(tr '\0' '\n' <"/proc/$pid/environ" | grep -c '^PG_OOM_ADJUST_')"
else
	echo "postmaster_pid=none"
fi
