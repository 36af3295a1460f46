#!/usr/bin/env bash
# Stops every testbed box: poweroff over SSH, then SIGTERM/SIGKILL the qemu process
# after a timeout. Only PIDs recorded in state/ whose command line is this box's
# qemu are signalled. Overlays are removed; serial logs stay.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
quiet=${1:-}
SHUTDOWN_TIMEOUT=${SHUTDOWN_TIMEOUT:-90}

is_our_qemu() { # pid name
	[[ -r /proc/$1/cmdline ]] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q -- "qemu-system-x86_64 -name $2 "
}

stop_box() {
	local pidf=$1 name pid
	name=$(basename "$pidf" .pid)
	pid=$(cat "$pidf" 2>/dev/null || true)
	if [[ -z $pid ]] || ! is_our_qemu "$pid" "$name"; then
		rm -f "$pidf"; return 0
	fi
	log "$name: powering off (pid $pid)"
	timeout 20 ssh -F "$STATE_DIR/ssh-config" -o ConnectTimeout=5 -o BatchMode=yes "$name" \
		'sudo systemctl poweroff' >/dev/null 2>&1 || true
	local deadline=$(( $(date +%s) + SHUTDOWN_TIMEOUT ))
	while is_our_qemu "$pid" "$name" && (( $(date +%s) < deadline )); do sleep 1; done
	if is_our_qemu "$pid" "$name"; then
		log "$name: still running after ${SHUTDOWN_TIMEOUT}s, killing"
		kill -TERM "$pid" 2>/dev/null || true
		sleep 3
		is_our_qemu "$pid" "$name" && kill -KILL "$pid" 2>/dev/null || true
		sleep 1
	fi
	is_our_qemu "$pid" "$name" && { log "$name: pid $pid survived SIGKILL"; return 1; }
	rm -f "$pidf" "$STATE_DIR/$name/overlay.qcow2"
	log "$name: stopped"
}

shopt -s nullglob
pids=()
for f in "$STATE_DIR"/box*.pid; do stop_box "$f" & pids+=($!); done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
[[ $quiet == --quiet ]] || log "all boxes down"
exit $rc
