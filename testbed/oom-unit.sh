#!/usr/bin/env bash
# The oom module's systemd path on a real Debian box: `pgtune apply` of the
# default playbook writes the drop-in for postgresql@15-main, systemd reports
# OOMPolicy=continue, the postmaster runs at oom_score_adj -1000 while its
# children and a client backend are at 0; `pgtune rollback` removes the drop-in
# and puts the unit and the postmaster back as they were. One box (MEM, default
# 3072 MiB). REUSE=1 runs against box1 already up; KEEP=1 leaves it up.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$TESTBED_DIR/assert.sh"

PGTUNE=${PGTUNE:-$REPO_DIR/bin/pgtune}
[[ -x $PGTUNE ]] || die "$PGTUNE missing: make build"
inv=$STATE_DIR/inventory.yml
b=box1
if [[ -z ${KEEP:-} ]]; then trap '"$TESTBED_DIR/down.sh" || true' EXIT; fi

phase "box up"
[[ -n ${REUSE:-} ]] || BOXES=1 MEM=${MEM:-3072} SMP=${SMP:-1} "$TESTBED_DIR/up.sh"
"${sshc[@]}" $b 'systemctl is-system-running --wait' >/dev/null 2>&1 || true

phase "before apply"
box_facts $b oom-facts.sh
before_policy=${F[unit_oom_policy]} before_adj=${F[postmaster_oom_score_adj]}
log "before: OOMPolicy=$before_policy postmaster oom_score_adj=$before_adj drop-in ${F[dropin]}"
want "$b/before: drop-in" "${F[dropin]}" absent

phase "pgtune apply (default playbook)"
expect_exit 0 oom-apply "$PGTUNE" apply -i "$inv" --yes
box_facts $b oom-facts.sh
printf '%s\n' "${!F[@]}" | sort | while read -r k; do echo "$k=${F[$k]}"; done >"$STATE_DIR/oom-after-apply.txt"
want "$b/applied: drop-in" "${F[dropin]}" present
want "$b/applied: systemctl show -p OOMPolicy" "${F[unit_oom_policy]}" continue
want "$b/applied: systemctl show -p OOMScoreAdjust" "${F[unit_oom_score_adjust]}" -1000
want "$b/applied: unit" "${F[unit_active]}" active
want "$b/applied: postmaster ${F[postmaster_pid]} oom_score_adj" "${F[postmaster_oom_score_adj]}" -1000
want "$b/applied: systemd MainPID is the postmaster" "${F[unit_main_pid]}" "${F[postmaster_pid]}"
want "$b/applied: client backend oom_score_adj" "${F[backend_oom_score_adj]}" 0
kids_bad=$(tr ' ' '\n' <<<"${F[children_oom_score_adj]}" | awk -F: '$2 != 0' | tr '\n' ' ')
want "$b/applied: children not at 0 (${F[children_oom_score_adj]})" "$kids_bad" ""
expect_exit 0 oom-check-after-apply "$PGTUNE" check -i "$inv"

phase "pgtune rollback"
expect_exit 0 oom-rollback "$PGTUNE" rollback -i "$inv" --yes
box_facts $b oom-facts.sh
printf '%s\n' "${!F[@]}" | sort | while read -r k; do echo "$k=${F[$k]}"; done >"$STATE_DIR/oom-after-rollback.txt"
want "$b/rolled back: drop-in" "${F[dropin]}" absent
want "$b/rolled back: OOMPolicy" "${F[unit_oom_policy]}" "$before_policy"
want "$b/rolled back: unit" "${F[unit_active]}" active
want "$b/rolled back: postmaster oom_score_adj" "${F[postmaster_oom_score_adj]}" "$before_adj"

phase "done: $fails failure(s)"
(( fails == 0 ))
