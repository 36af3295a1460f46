package e2e

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// reserveMemberPools grows this machine's huge page pool by room for a
// small segment (48 MiB, or one page of a larger default size) for each
// of members beside what it holds now (other tests' clusters may hold
// some), under the kernel lock, which puts the value back when the test
// ends. It returns the pool in bytes and one member's share. The members
// are built before it is called, outside the lock (they run off huge
// pages until pgtune puts them there), so that other packages' kernel
// tests do not wait on initdb and pg_basebackup; it has them stopped
// before the lock goes (testhost.StopOnCleanup), with the huge pages
// pgtune gave them.
func reserveMemberPools(t *testing.T, members []*testhost.Cluster) (pool, perMember int64) {
	t.Helper()
	kernel := testhost.LockKernel(t)
	testhost.StopOnCleanup(t, members...)
	pages := kernel.PagesFor(48 << 20)
	total := kernel.MakeRoom(t, int64(len(members))*pages+2)
	return total * kernel.PageSize(), pages * kernel.PageSize()
}

// TestRestartOrderCascade: primary → s1 → s2 (s2 made with pg_basebackup
// from the standby s1): facts says s2 streams from s1, and apply restarts
// s2, then s1, then the primary, each back before the next goes down.
func TestRestartOrderCascade(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: three PostgreSQL servers and the kernel")
	}
	set := testhost.StreamingReplication(t, 1)
	s2 := set.AddCascaded(t, set.Standbys[0], "s2")
	pool, perMember := reserveMemberPools(t, set.Members())
	work := t.TempDir()
	members := map[string]*testhost.Cluster{"primary": set.Primary, "s1": set.Standbys[0], "s2": s2}
	inv := localMembers(t, work, members, "")
	book := filepath.Join(work, "book.yml")
	writeFile(t, book, fmt.Sprintf(`- name: cascade order under test
  hosts: all
  policy:
    hugepages:
      pool: %d
      sysctl_file: "${vars.sysctl_dir}/10-hugepages.conf"
    pgconf:
      pool: %d
      primary: restart
`, pool, perMember))

	var out, errOut bytes.Buffer
	app := newApp()
	app.Stdout, app.Stderr = &out, &errOut
	if code := app.Run([]string{"facts", "-i", inv}); code != 0 {
		t.Fatalf("facts: exit %d\n%s", code, errOut.String())
	}
	if !strings.Contains(out.String(), ": primary primary, standbys s2, s1 (s2 streams from s1)\n") {
		t.Errorf("facts does not show the cascade:\n%s", out.String())
	}
	started := map[string]string{}
	for name, c := range members {
		started[name] = c.Query(t, "SELECT pg_postmaster_start_time()")
	}
	code, applied, stderr := pgtune(t, "apply", "--yes", "-i", inv, book)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%+v\n%s", code, applied, stderr)
	}
	order := []string{"s2", "s1", "primary"}
	checkRestartOrder(t, order, members, started)
	set.WaitStreaming(t)
}
