#!/usr/bin/env bash
# Fleet end-to-end on testbed boxes: check reports drift (2), apply --yes succeeds
# (0), every box holds the policy in the kernel and the postmaster, the policy
# survives a reboot, and check is clean (0). KEEP=1 leaves the boxes running.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PGTUNE=${PGTUNE:-$REPO_DIR/bin/pgtune}
[[ -x $PGTUNE ]] || die "$PGTUNE missing: make build"
BOXES=${BOXES:-2}
export BOXES
inv=$STATE_DIR/inventory.yml
sshc=(ssh -F "$STATE_DIR/ssh-config" -o BatchMode=yes)
fails=0
t_start=$(date +%s)
phase() { log "== $* ($(( $(date +%s) - t_start ))s)"; }
ok() { log "ok   $*"; }
bad() { log "FAIL $*"; fails=$((fails + 1)); }

if [[ -z ${KEEP:-} ]]; then trap '"$TESTBED_DIR/down.sh" || true' EXIT; fi

phase "boxes up"
# REUSE=1 runs against boxes already up (make testbed-up), e.g. while iterating.
[[ -n ${REUSE:-} ]] || "$TESTBED_DIR/up.sh"
boxes=($(seq -f 'box%g' 1 "$BOXES"))

expect_exit() { # want label cmd...
	local want=$1 label=$2; shift 2
	local rc=0
	"$@" >"$STATE_DIR/e2e-$label.out" 2>"$STATE_DIR/e2e-$label.err" || rc=$?
	if [[ $rc == "$want" ]]; then ok "$label exit $rc"; else
		bad "$label exit $rc, want $want (output in $STATE_DIR/e2e-$label.{out,err})"
		tail -20 "$STATE_DIR/e2e-$label.out" "$STATE_DIR/e2e-$label.err" >&2
	fi
}

phase "pgtune check (drift expected)"
expect_exit 2 check-before "$PGTUNE" check -i "$inv"
phase "pgtune apply --yes"
expect_exit 0 apply "$PGTUNE" apply -i "$inv" --yes
cat "$STATE_DIR/e2e-apply.out"

# verify_box asserts the policy on one box from the facts its kernel reports.
verify_box() {
	local b=$1 when=$2 f
	f=$("${sshc[@]}" "$b" sudo bash -s <"$TESTBED_DIR/remote/policy-facts.sh") || { bad "$b: facts unreachable"; return; }
	echo "$f" >"$STATE_DIR/$b/facts-$when.txt"
	local -A v
	while IFS='=' read -r k val; do v[$k]=$val; done <<<"$f"
	local hp_kb=$(( v[hugepages_total] * v[hugepagesize_kb] ))
	local want_pages=$(( v[mem_total_kb] / 4 / v[hugepagesize_kb] ))
	# The default headroom: min(2 GiB, MemTotal / 16), in kB.
	local headroom_kb=$(( v[mem_total_kb] / 16 < 2097152 ? v[mem_total_kb] / 16 : 2097152 ))
	local want_oc=$(( (v[mem_total_kb] - hp_kb) * 8 / 10 + headroom_kb ))
	local d=$(( v[overcommit_kbytes] - want_oc )); d=${d#-}
	[[ ${v[hugepages_total]} -gt 0 && ${v[hugepages_total]} -ge $(( want_pages - 1 )) ]] &&
		ok "$b/$when: pool ${v[hugepages_total]} pages (25% of MemTotal = $want_pages)" ||
		bad "$b/$when: pool ${v[hugepages_total]} pages, want ~$want_pages"
	[[ ${v[nr_hugepages_conf]} == "${v[hugepages_total]}" ]] &&
		ok "$b/$when: pool persisted in /etc/sysctl.d/10-hugepages.conf" ||
		bad "$b/$when: 10-hugepages.conf says ${v[nr_hugepages_conf]}, kernel ${v[hugepages_total]}"
	[[ ${v[pg_huge_pages]:-} == on && ${v[postmaster_hugetlb_kb]:-0} -gt 0 ]] &&
		ok "$b/$when: postmaster ${v[postmaster_pid]} HugetlbPages ${v[postmaster_hugetlb_kb]} kB, huge_pages=on, shared_buffers=${v[pg_shared_buffers]}" ||
		bad "$b/$when: postgres huge_pages=${v[pg_huge_pages]:-?} HugetlbPages=${v[postmaster_hugetlb_kb]:-?} (${v[postgresql_active]})"
	[[ ${v[overcommit_memory]} == 2 && $d -le 1 ]] &&
		ok "$b/$when: overcommit strict, kbytes ${v[overcommit_kbytes]} = 0.8*(MemTotal-pool)+min(2GiB,MemTotal/16) ($want_oc)" ||
		bad "$b/$when: overcommit_memory=${v[overcommit_memory]} kbytes=${v[overcommit_kbytes]}, want 2 / $want_oc"
	[[ ${v[overcommit_memory_conf]} == 2 && ${v[overcommit_kbytes_conf]} == "${v[overcommit_kbytes]}" ]] &&
		ok "$b/$when: overcommit persisted in /etc/sysctl.d/99-overcommit.conf" ||
		bad "$b/$when: 99-overcommit.conf says ${v[overcommit_memory_conf]}/${v[overcommit_kbytes_conf]}"
}

phase "verify inside every box"
for b in "${boxes[@]}"; do verify_box "$b" after-apply; done

phase "reboot ${boxes[0]}"
b=${boxes[0]}
"${sshc[@]}" "$b" 'sudo systemctl reboot' >/dev/null 2>&1 || true
t_rb=$(date +%s)
# Wait until the old boot is gone, then for ssh to come back.
while "${sshc[@]}" -o ConnectTimeout=3 "$b" true 2>/dev/null && (( $(date +%s) - t_rb < 120 )); do sleep 2; done
until "${sshc[@]}" -o ConnectTimeout=5 "$b" true 2>/dev/null; do
	(( $(date +%s) - t_rb < ${BOOT_TIMEOUT:-900} )) || { bad "$b: no ssh after reboot"; break; }
	sleep 3
done
log "$b back after $(( $(date +%s) - t_rb ))s"
"${sshc[@]}" "$b" 'systemctl is-system-running --wait' >/dev/null 2>&1 || true
verify_box "$b" after-reboot

phase "pgtune check (in policy expected)"
expect_exit 0 check-after "$PGTUNE" check -i "$inv"

phase "done: $fails failure(s)"
(( fails == 0 ))
