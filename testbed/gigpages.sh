#!/usr/bin/env bash
# 1 GiB huge pages on a real Debian box. qemu's TCG `-cpu max` has pdpe1gb, so
# the box's kernel offers hugepages-1048576kB even where this machine's CPU does
# not. Applies a playbook with hugepages.page_size 1GiB (pool 1 GiB):
# the pool allocated through sysfs, PostgreSQL up with huge_page_size=1GB on
# those pages (smaps); reboots and checks the pool is back before PostgreSQL
# starts (tmpfiles); switches back to the default page size and checks the
# 1 GiB boot file and pool are gone; rolls that switch back and checks they
# return (the 1 GiB pool must be back before PostgreSQL restarts onto it, and
# the 2 MiB pool given back after), then rolls everything back. One box (MEM,
# default 6144 MiB: a 1 GiB page needs a 1 GiB-aligned range inside one zone
# with nothing unmovable in it. In a 4 GiB box there are four such ranges: the
# first spans the DMA zone, swiotlb's buffer sits in the top one below 4 GiB,
# the kernel's randomised (KASLR) physical address may take the next, and the
# only Normal one holds the kernel's unmovable allocations, so the page was
# refused on some boots and not others; 6 GiB adds two Normal ranges). REUSE=1 / KEEP=1 as in e2e; SKIP_REBOOT=1 leaves out the
# reboot (the boot order, which the later phases do not depend on).
set -eo pipefail # not -u: a box that does not answer leaves facts unset, which the checks report
. "$(dirname "$0")/lib.sh"
. "$TESTBED_DIR/assert.sh"

PGTUNE=${PGTUNE:-$REPO_DIR/bin/pgtune}
[[ -x $PGTUNE ]] || die "$PGTUNE missing: make build"
inv=$STATE_DIR/inventory.yml
b=box1
if [[ -z ${KEEP:-} ]]; then trap '"$TESTBED_DIR/down.sh" || true' EXIT; fi

# Two playbooks with only the modules that page size concerns (each module
# costs minutes under TCG): a 1 GiB pool of 1 GiB pages, and the same pool in
# the kernel's default size. pgconf restarts PostgreSQL onto the pool.
mkdir -p "$STATE_DIR"
gig=$STATE_DIR/hugepages-1g.yml
def=$STATE_DIR/hugepages-default.yml
cat >"$gig" <<'YML'
- name: 1 GiB huge pages
  hosts: all
  policy:
    hugepages:
      pool: "${1 * GiB}"
      page_size: 1GiB
    pgconf:
      restart: true
YML
cat >"$def" <<'YML'
- name: huge pages of the default size
  hosts: all
  policy:
    hugepages:
      pool: "${1 * GiB}"
    pgconf:
      restart: true
YML

save_facts() { printf '%s\n' "${!F[@]}" | sort | while read -r k; do echo "$k=${F[$k]}"; done >"$STATE_DIR/gig-$1.txt"; }

phase "box up"
[[ -n ${REUSE:-} ]] || BOXES=1 MEM=${MEM:-6144} SMP=${SMP:-2} "$TESTBED_DIR/up.sh"
"${sshc[@]}" $b 'systemctl is-system-running --wait' >/dev/null 2>&1 || true
box_facts $b gig-facts.sh; save_facts before
want "$b: CPU flag pdpe1gb" "${F[cpu_pdpe1gb]}" yes
want "$b: 1 GiB pool offered" "${F[gig_nr_hugepages]}" 0

phase "pgtune apply (page_size 1GiB)"
expect_exit 0 gig-apply "$PGTUNE" apply -i "$inv" --yes "$gig"
cat "$STATE_DIR/gig-apply.out"
verify_gig() { # when
	box_facts $b gig-facts.sh; save_facts "$1"
	want "$b/$1: sysfs 1 GiB nr_hugepages" "${F[gig_nr_hugepages]}" 1
	want "$b/$1: 1 GiB pages free (the segment sits on the page)" "${F[gig_free_hugepages]}" 0
	want "$b/$1: tmpfiles line" "${F[tmpfiles]}" "w /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages - - - - 1"
	want "$b/$1: huge_pages" "${F[pg_huge_pages]:-}" on
	want "$b/$1: huge_page_size" "${F[pg_huge_page_size]:-}" 1GB
	want "$b/$1: postmaster mapping on 1 GiB pages (smaps kB)" "${F[smaps_1g_kb]:-}" 1048576
	want "$b/$1: 2 MiB pool" "${F[mib2_nr_hugepages]}" 0
	log "$b/$1: shared_buffers ${F[pg_shared_buffers]:-?}, shared_memory_size ${F[pg_shared_memory_size]:-?}, HugetlbPages ${F[hugetlb_kb]:-?} kB"
}
verify_gig after-apply
expect_exit 0 gig-check-after-apply "$PGTUNE" check -i "$inv" "$gig"

if [[ -z ${SKIP_REBOOT:-} ]]; then
	phase "reboot"
	reboot_box $b
	verify_gig after-reboot
	if (( ${F[tmpfiles_setup_done_us]:-0} > 0 && ${F[tmpfiles_setup_done_us]} < ${F[postgres_start_us]:-0} )); then
		ok "$b: systemd-tmpfiles-setup done at ${F[tmpfiles_setup_done_us]} us, PostgreSQL started at ${F[postgres_start_us]} us"
	else
		bad "$b: tmpfiles-setup done at ${F[tmpfiles_setup_done_us]:-?} us, PostgreSQL started at ${F[postgres_start_us]:-?} us"
	fi
	expect_exit 0 gig-check-after-reboot "$PGTUNE" check -i "$inv" "$gig"
fi

phase "pgtune apply (page_size unset: back to 2 MiB pages)"
expect_exit 0 gig-switch-back "$PGTUNE" apply -i "$inv" --yes --format json "$def"
switch_run=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$STATE_DIR/gig-switch-back.out" 2>/dev/null || true)
box_facts $b gig-facts.sh; save_facts switched-back
want "$b/switched back: tmpfiles file" "${F[tmpfiles]}" absent
want "$b/switched back: sysfs 1 GiB nr_hugepages" "${F[gig_nr_hugepages]}" 0
want "$b/switched back: 1 GiB surplus (freed at the restart)" "${F[gig_surplus_hugepages]}" 0
want "$b/switched back: huge_page_size" "${F[pg_huge_page_size]:-}" 0
want "$b/switched back: postmaster mapping on 1 GiB pages (smaps kB)" "${F[smaps_1g_kb]:-}" 0
[[ ${F[mib2_nr_hugepages]} -gt 0 && ${F[smaps_2m_kb]:-0} -gt 0 ]] &&
	ok "$b/switched back: 2 MiB pool ${F[mib2_nr_hugepages]} pages, postmaster maps ${F[smaps_2m_kb]} kB on them" ||
	bad "$b/switched back: 2 MiB pool ${F[mib2_nr_hugepages]}, smaps 2 MiB ${F[smaps_2m_kb]:-?} kB"
expect_exit 0 gig-check-switched-back "$PGTUNE" check -i "$inv" "$def"

phase "pgtune rollback --run $switch_run (the switch undone)"
if [[ -n $switch_run ]]; then
	expect_exit 0 gig-rollback "$PGTUNE" rollback -i "$inv" --yes --run "$switch_run"
	box_facts $b gig-facts.sh; save_facts rolled-back
	want "$b/rolled back: tmpfiles line" "${F[tmpfiles]}" "w /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages - - - - 1"
	want "$b/rolled back: sysfs 1 GiB nr_hugepages" "${F[gig_nr_hugepages]}" 1
	want "$b/rolled back: huge_page_size" "${F[pg_huge_page_size]:-}" 1GB
	want "$b/rolled back: postmaster mapping on 1 GiB pages (smaps kB)" "${F[smaps_1g_kb]:-}" 1048576
	want "$b/rolled back: unit" "${F[unit_active]}" active
	# The switch grew the 2 MiB pool; rollback shrinks it only after the
	# restart moved PostgreSQL off it, so nothing is left surplus.
	want "$b/rolled back: 2 MiB pool given back" "${F[mib2_nr_hugepages]}" 0
	want "$b/rolled back: 2 MiB surplus" "${F[mib2_surplus_hugepages]}" 0
	want "$b/rolled back: sysctl.d file" "${F[sysctl_conf]}" ""
	# The rollback's plan grows the 1 GiB pool first, before PostgreSQL's
	# configuration is put back (and the server restarted onto it).
	pool_line=$(grep -n 'hugepages-1048576kB/nr_hugepages' "$STATE_DIR/gig-rollback.out" | head -1 | cut -d: -f1)
	conf_line=$(grep -n 'conf\.d/' "$STATE_DIR/gig-rollback.out" | head -1 | cut -d: -f1)
	(( ${pool_line:-0} > 0 && ${pool_line:-0} < ${conf_line:-0} )) &&
		ok "$b/rolled back: the plan grows the 1 GiB pool (line $pool_line) before PostgreSQL's configuration (line $conf_line)" ||
		bad "$b/rolled back: plan line of the 1 GiB pool ${pool_line:-none}, of PostgreSQL's configuration ${conf_line:-none}"
	expect_exit 0 gig-check-rolled-back "$PGTUNE" check -i "$inv" "$gig"

	phase "pgtune rollback (everything: back to before pgtune)"
	expect_exit 0 gig-rollback-all "$PGTUNE" rollback -i "$inv" --yes
	box_facts $b gig-facts.sh; save_facts rolled-back-all
	want "$b/all rolled back: tmpfiles file" "${F[tmpfiles]}" absent
	want "$b/all rolled back: sysfs 1 GiB nr_hugepages" "${F[gig_nr_hugepages]}" 0
	want "$b/all rolled back: 1 GiB surplus" "${F[gig_surplus_hugepages]}" 0
	want "$b/all rolled back: 2 MiB pool" "${F[mib2_nr_hugepages]}" 0
	want "$b/all rolled back: postmaster mapping on 1 GiB pages (smaps kB)" "${F[smaps_1g_kb]:-}" 0
	want "$b/all rolled back: unit" "${F[unit_active]}" active
	[[ ${F[postmaster_pid]} != none ]] && ok "$b/all rolled back: postmaster ${F[postmaster_pid]} up" || bad "$b/all rolled back: no postmaster"
else
	bad "no run id in the switch-back report ($STATE_DIR/gig-switch-back.out)"
fi

phase "done: $fails failure(s)"
(( fails == 0 ))
