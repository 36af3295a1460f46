# Assertions for the testbed's end-to-end scripts (sourced after lib.sh).
# shellcheck shell=bash
fails=0
t_start=$(date +%s)
phase() { log "== $* ($(( $(date +%s) - t_start ))s)"; }
ok() { log "ok   $*"; }
bad() { log "FAIL $*"; fails=$((fails + 1)); }
# A box under TCG on a loaded machine can take longer than ssh-config's 10 s
# to answer the banner.
sshc=(ssh -F "$STATE_DIR/ssh-config" -o BatchMode=yes -o ConnectTimeout=90)

# expect_exit WANT LABEL CMD...: runs CMD, output in $STATE_DIR/LABEL.{out,err}.
expect_exit() {
	local want=$1 label=$2; shift 2
	local rc=0
	"$@" >"$STATE_DIR/$label.out" 2>"$STATE_DIR/$label.err" || rc=$?
	if [[ $rc == "$want" ]]; then ok "$label exit $rc"; else
		bad "$label exit $rc, want $want (output in $STATE_DIR/$label.{out,err})"
		tail -n 30 "$STATE_DIR/$label.out" "$STATE_DIR/$label.err" >&2
	fi
}

# box_facts BOX SCRIPT: runs a remote/ script as root in BOX, fills the
# associative array F with its key=value lines.
declare -A F
box_facts() {
	local out k v
	F=()
	# A failure is counted, not fatal: the checks that follow fail on the
	# missing keys and the script goes on to its end (and teardown).
	out=$("${sshc[@]}" "$1" sudo bash -s <"$TESTBED_DIR/remote/$2") || { bad "$1: $2 failed"; return 0; }
	while IFS='=' read -r k v; do [[ -n $k ]] && F[$k]=$v; done <<<"$out"
}

# want LABEL GOT EXPECTED
want() { if [[ $2 == "$3" ]]; then ok "$1 = $2"; else bad "$1 = '$2', want '$3'"; fi; }

# reboot_box BOX: reboots and waits for ssh and a settled boot.
reboot_box() {
	local b=$1 t0
	"${sshc[@]}" "$b" 'sudo systemctl reboot' >/dev/null 2>&1 || true
	t0=$(date +%s)
	while "${sshc[@]}" -o ConnectTimeout=3 "$b" true 2>/dev/null && (( $(date +%s) - t0 < 120 )); do sleep 2; done
	until "${sshc[@]}" -o ConnectTimeout=5 "$b" true 2>/dev/null; do
		(( $(date +%s) - t0 < ${BOOT_TIMEOUT:-900} )) || { bad "$b: no ssh after reboot"; return 1; }
		sleep 3
	done
	"${sshc[@]}" "$b" 'systemctl is-system-running --wait' >/dev/null 2>&1 || true
	log "$b back after $(( $(date +%s) - t0 ))s"
}
