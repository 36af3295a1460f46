package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// localMembers writes an inventory of this machine's clusters, one host
// per data directory over the local connection, each with its own state
// and sysctl directories.
func localMembers(t *testing.T, work string, members map[string]*testhost.Cluster, extraVars string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("all:\n  hosts:\n")
	for name, c := range members {
		fmt.Fprintf(&b, "    %s:\n      connection: local\n      pg_data: %s\n      pg_bin: %s\n      pgtune_state_dir: %s\n      sysctl_dir: %s\n",
			name, c.DataDir, c.BinDir, filepath.Join(work, name, "state"), filepath.Join(work, name, "sysctl.d"))
	}
	if extraVars != "" {
		b.WriteString("  vars:\n" + extraVars)
	}
	inv := filepath.Join(work, "inventory.yml")
	writeFile(t, inv, b.String())
	return inv
}

// TestPatroniMembersLeftAlone: on a real three-member Patroni cluster,
// check shows each member as Patroni-managed and plans no edit of the
// postgresql.conf Patroni generates and no restart; apply refuses every
// member, naming what it would have done, and changes nothing: files,
// postmasters and Patroni's history stay as they were.
func TestPatroniMembersLeftAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: etcd, Patroni, PostgreSQL and the kernel")
	}
	kernel := testhost.LockKernel(t)
	pc := testhost.Patroni(t, 3)
	work := t.TempDir()
	members := map[string]*testhost.Cluster{}
	for _, m := range pc.Members {
		members[m.Name] = m.PG
	}
	inv := localMembers(t, work, members, "")
	before := map[string]hostState{}
	for name, c := range members {
		before[name] = snapshot(t, c, c.DataDir)
	}

	code, r, stderr := pgtune(t, "check", "-i", inv)
	if code != 2 {
		t.Fatalf("check exit %d, want 2 (drift)\n%s", code, stderr)
	}
	for _, h := range r.Hosts {
		if h.Error != nil {
			t.Errorf("%s: check error %s", h.Name, *h.Error)
		}
		managed := false
		for _, c := range h.Changes {
			if c.Module != "pgconf" {
				continue
			}
			if strings.HasPrefix(c.Target, "Patroni-managed member ") && strings.Contains(c.Target, `member "`+h.Name+`"`) {
				managed = true
				continue
			}
			t.Errorf("%s: pgconf plans %s under Patroni", h.Name, c.Target)
		}
		if !managed {
			t.Errorf("%s: check does not show the member as Patroni-managed: %v", h.Name, changeSet(h.Changes))
		}
	}

	code, r, stderr = pgtune(t, "apply", "--yes", "-i", inv)
	if code != 1 {
		t.Fatalf("apply exit %d, want 1\n%s", code, stderr)
	}
	for _, h := range r.Hosts {
		if h.Status != "failed" || h.Error == nil || !strings.Contains(*h.Error, "managed by Patroni") ||
			!strings.Contains(*h.Error, "include_dir") || !strings.Contains(*h.Error, "restart") {
			t.Errorf("%s: apply status %s, error %v; want a refusal naming what it would have done", h.Name, h.Status, h.Error)
		}
		if len(h.Changes) != 0 {
			t.Errorf("%s: apply changed %v", h.Name, changeSet(h.Changes))
		}
	}
	for name, c := range members {
		after := snapshot(t, c, c.DataDir)
		if after.pid != before[name].pid {
			t.Errorf("%s: postmaster restarted (pid %d → %d)", name, before[name].pid, after.pid)
		}
		for p, content := range before[name].files {
			if after.files[p] != content {
				t.Errorf("%s: %s changed", name, p)
			}
		}
		if len(after.files) != len(before[name].files) {
			t.Errorf("%s: files appeared: %d → %d", name, len(before[name].files), len(after.files))
		}
		if _, err := os.Stat(filepath.Join(c.DataDir, "conf.d")); err == nil {
			t.Errorf("%s: conf.d created", name)
		}
	}
	if h := pc.History(t); len(h) != 0 {
		t.Errorf("Patroni history after apply: %s (a failover?)", h)
	}
	for k, v := range before[pc.Members[0].Name].kernel {
		if got, _ := testhost.ReadSysctl(k); got != v {
			t.Errorf("kernel %s changed: %s → %s", k, v, got)
		}
	}
	_ = kernel
}
