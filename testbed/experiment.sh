#!/usr/bin/env bash
# The seed's OOM experiment, inside ONE testbed box (never on this machine): the
# load runs in the box, driven from here over SSH. Runs it with the kernel's
# default overcommit, then after `pgtune apply` (the default policy, whose
# headroom is min(2 GiB, MemTotal / 16)), and, unless FLAT=0, once more with the
# seed's flat 2 GiB headroom, which pgtune refuses as not protective on such a
# box: check must say so, and it is applied with accept_unprotective: true to
# show what that limit does. Writes state/experiment.json.
# Env: EXP_MEM MiB (4096), EXP_SMP (2), IDLE (20), STEP s between loaders (5);
# SKIP_DEFAULT=1 skips the default-overcommit run (~13 min of thrashing under
# TCG), FLAT=0 the flat-headroom one, so SKIP_DEFAULT=1 FLAT=0 runs the strict
# half alone.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PGTUNE=${PGTUNE:-$REPO_DIR/bin/pgtune}
[[ -x $PGTUNE ]] || die "$PGTUNE missing: make build"
inv=$STATE_DIR/inventory.yml
# A box under TCG on a loaded machine can take longer than ssh-config's 10 s
# to answer the banner.
sshc=(ssh -F "$STATE_DIR/ssh-config" -o BatchMode=yes -o ConnectTimeout=90)
if [[ -z ${KEEP:-} ]]; then trap '"$TESTBED_DIR/down.sh" || true' EXIT; fi

# REUSE=1: box1 is already up (make testbed-up, or an earlier KEEP=1 run).
[[ -n ${REUSE:-} ]] || BOXES=1 MEM=${EXP_MEM:-4096} SMP=${EXP_SMP:-2} "$TESTBED_DIR/up.sh"
"${sshc[@]}" box1 'sudo install -m 755 /dev/stdin /usr/local/sbin/oom-experiment' <"$TESTBED_DIR/remote/oom-experiment.sh"
"${sshc[@]}" box1 'systemctl is-system-running --wait' >/dev/null 2>&1 || true

run() { # label
	local label=$1 st
	log "experiment run '$label': $("${sshc[@]}" box1 'cat /proc/sys/vm/overcommit_memory /proc/sys/vm/overcommit_kbytes /proc/sys/vm/nr_hugepages' | tr '\n' ' ')(overcommit_memory, kbytes, huge pages)"
	# A transient unit outlives our SSH session, which the OOM killer may take.
	"${sshc[@]}" box1 "sudo systemd-run --quiet --unit=oomexp-$label -p OOMScoreAdjust=-1000 \
		-E IDLE=${IDLE:-20} -E STEP=${STEP:-5} /usr/local/sbin/oom-experiment $label"
	local deadline=$(( $(date +%s) + ${EXP_TIMEOUT:-1800} ))
	while (( $(date +%s) < deadline )); do
		sleep 10
		st=$("${sshc[@]}" box1 "systemctl is-active oomexp-$label" 2>/dev/null || true)
		case $st in
		active|activating|reloading|"") continue ;;
		*) break ;;
		esac
	done
	mkdir -p "$STATE_DIR/experiment-$label"
	"${sshc[@]}" box1 "sudo tar -C /var/lib/oomexp/$label -cf - ." | tar -C "$STATE_DIR/experiment-$label" -xf -
	"${sshc[@]}" box1 "sudo tail -c 20000 /var/log/postgresql/postgresql-15-main.log" >"$STATE_DIR/experiment-$label/postgresql.log" || true
	"${sshc[@]}" box1 "sudo dmesg" >"$STATE_DIR/experiment-$label/dmesg.txt" || true
	[[ -s $STATE_DIR/experiment-$label/result.json ]] || die "run $label left no result.json"
	log "run '$label': $(tr -d '\n' <"$STATE_DIR/experiment-$label/result.json")"
	# After an OOM kill systemd may have stopped the unit (OOMPolicy=stop): bring the
	# server back so the next step starts from a running cluster.
	if ! "${sshc[@]}" box1 'systemctl is-active --quiet postgresql@15-main'; then
		log "postgresql@15-main is down after run '$label'; starting it"
		"${sshc[@]}" box1 'sudo systemctl reset-failed postgresql@15-main; sudo systemctl start postgresql@15-main'
	fi
}

# Box fresh from the image: kernel default overcommit (0), no huge pages.
if [[ -z ${SKIP_DEFAULT:-} ]]; then run default; fi

log "pgtune apply (default policy)"
"$PGTUNE" apply -i "$inv" --yes >"$STATE_DIR/experiment-apply.out" 2>&1 || { cat "$STATE_DIR/experiment-apply.out" >&2; die "pgtune apply failed"; }
# What the policy put in place, for the record: the kernel values and the oom
# module's shield (postmaster and backend oom_score_adj, the unit's OOMPolicy).
{
	"${sshc[@]}" box1 sudo bash -s <"$TESTBED_DIR/remote/policy-facts.sh"
	"${sshc[@]}" box1 sudo bash -s <"$TESTBED_DIR/remote/oom-facts.sh"
} >"$STATE_DIR/experiment-policy.txt" || log "could not read the policy back from the box (recorded what came)"
log "policy in the box: $(grep -E '^(overcommit_kbytes|hugepages_total|unit_oom_policy|postmaster_oom_score_adj|backend_oom_score_adj)=' "$STATE_DIR/experiment-policy.txt" | tr '\n' ' ')"
run strict
labels=(strict)
[[ -n ${SKIP_DEFAULT:-} ]] || labels=(default strict)

if [[ ${FLAT:-1} != 0 ]]; then
	# The seed's flat 2 GiB headroom, sized for servers: on a 4 GiB box it lifts the
	# commit limit above what RAM outside the pool can back.
	sed -e 's|headroom: "\${min(2 \* GiB, floor(facts.mem_total / 16))}"|headroom: "${2 * GiB}"|' \
		"$REPO_DIR/playbooks/memory.yml" >"$STATE_DIR/memory-flat.yml"
	grep -q 'headroom: "${2 \* GiB}"' "$STATE_DIR/memory-flat.yml" || die "could not set a flat headroom in playbooks/memory.yml"
	rc=0
	"$PGTUNE" check -i "$inv" "$STATE_DIR/memory-flat.yml" >"$STATE_DIR/experiment-check-flat.out" 2>&1 || rc=$?
	grep -q 'NOT protective' "$STATE_DIR/experiment-check-flat.out" && [[ $rc == 2 ]] ||
		{ cat "$STATE_DIR/experiment-check-flat.out" >&2; die "check did not report the flat headroom as not protective (exit $rc)"; }
	sed -i 's|accept_unprotective: false|accept_unprotective: true|' "$STATE_DIR/memory-flat.yml"
	grep -q 'accept_unprotective: true' "$STATE_DIR/memory-flat.yml" || die "could not accept the flat headroom"
	log "pgtune apply (flat 2 GiB headroom, accepted)"
	"$PGTUNE" apply -i "$inv" --yes "$STATE_DIR/memory-flat.yml" >"$STATE_DIR/experiment-apply-flat.out" 2>&1 ||
		{ cat "$STATE_DIR/experiment-apply-flat.out" >&2; die "pgtune apply (flat) failed"; }
	run strict_flat
	labels+=(strict_flat)
fi

python3 "$TESTBED_DIR/experiment-table.py" "$STATE_DIR" "${labels[@]}"
log "wrote $STATE_DIR/experiment.json"
