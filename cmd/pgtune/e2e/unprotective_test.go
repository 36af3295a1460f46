package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestUnprotectiveRefusedUpFront runs check and apply on this machine with
// a headroom as large as its RAM, a commit limit no host can back: check
// reports the finding (exit 2) with the verdict's numbers, and apply fails
// the host before any module acts, so not even the huge page file planned
// ahead of overcommit is written and the kernel is left as it was.
func TestUnprotectiveRefusedUpFront(t *testing.T) {
	if testing.Short() {
		t.Skip("reads this machine's kernel")
	}
	kernel := testhost.WatchKernel(t) // the kernel holds still between plan and apply
	work := t.TempDir()
	sysctlDir := filepath.Join(work, "sysctl.d")
	inv := filepath.Join(work, "inventory.yml")
	writeFile(t, inv, "all:\n  hosts:\n    db1:\n      connection: local\n  vars:\n"+
		"    sysctl_dir: "+sysctlDir+"\n    pgtune_state_dir: "+filepath.Join(work, "state")+"\n")
	book := filepath.Join(work, "memory.yml")
	writeFile(t, book, `- name: a limit above RAM
  hosts: ungrouped
  policy:
    hugepages:
      pool: "${(facts.hugepages_total - facts.hugepages_surp) * facts.hugepage_size}"
      sysctl_file: "${vars.sysctl_dir}/10-hugepages.conf"
    overcommit:
      headroom: "${facts.mem_total}"
      max_committed: 1 # the preflight's verdict would be this machine's load
      sysctl_file: "${vars.sysctl_dir}/99-overcommit.conf"
`)

	code, planned, stderr := pgtune(t, "check", "-i", inv, book)
	if code != 2 {
		t.Fatalf("check: exit %d, want 2 (drift)\n%+v\n%s", code, planned, stderr)
	}
	h := planned.Hosts[0]
	if !targets(h.Changes)["overcommit commit limit"] || !targets(h.Changes)["hugepages "+sysctlDir+"/10-hugepages.conf"] {
		t.Errorf("check plan: %v", changeSet(h.Changes))
	}
	verdict := ""
	for _, n := range h.Notes {
		if strings.HasPrefix(n, "commit limit ") {
			verdict = n
		}
	}
	if !strings.Contains(verdict, " > ") || !strings.Contains(verdict, "NOT protective") || !strings.Contains(verdict, "min_free_kbytes") {
		t.Errorf("verdict note %q; notes %q", verdict, h.Notes)
	}

	code, applied, stderr := pgtune(t, "apply", "--yes", "-i", inv, book)
	if code != 1 {
		t.Fatalf("apply: exit %d, want 1\n%+v\n%s", code, applied, stderr)
	}
	a := applied.Hosts[0]
	if a.Status != "failed" || a.Error == nil || !strings.Contains(*a.Error, "db1: overcommit: refusing a commit limit that does not protect this host") ||
		!strings.Contains(*a.Error, "set accept_unprotective: true") || len(a.Changes) != 0 {
		t.Fatalf("apply: %+v", a)
	}
	if _, err := os.Stat(sysctlDir); !os.IsNotExist(err) {
		t.Errorf("apply wrote under %s before refusing: %v", sysctlDir, err)
	}
	for k, v := range kernel.Values {
		if now, _ := testhost.ReadSysctl(k); now != v {
			t.Errorf("%s changed to %s", k, now)
		}
	}
}
