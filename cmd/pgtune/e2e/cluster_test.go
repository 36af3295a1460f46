package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// heldHugePages is the expression for the huge pages other processes
// hold (in use or reserved), in bytes.
const heldHugePages = "(facts.hugepages_total - facts.hugepages_free + facts.hugepages_rsvd) * facts.hugepage_size"

// defaultPolicyWithoutPreflights is the embedded default policy
// (playbooks/memory.yml) with hugepages' min_available 0 and overcommit's
// max_committed 1: its verdicts then do not depend on the machine's
// MemAvailable or on what other processes commit. Nor on the huge pages
// other processes hold: the pool grows by them and pgconf sizes each
// cluster to the rest (hugepages refuses a pool below them, and a segment
// the size of the whole pool would not fit beside them). Where nothing
// else holds huge pages, the policy plans what the default plans.
func defaultPolicyWithoutPreflights(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../../playbooks/memory.yml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, kv := range [][2]string{
		{"\n    hugepages:\n      pool: \"${floor(facts.mem_total * 0.25)}\"\n",
			"\n    hugepages:\n      pool: \"${floor(facts.mem_total * 0.25) + " + heldHugePages + "}\"\n      min_available: 0\n"},
		{"\n    pgconf:\n", "\n    pgconf:\n      pool: \"${hugepages.pool - " + heldHugePages + "}\"\n"},
		{"\n    overcommit:\n", "\n    overcommit:\n      max_committed: 1\n"},
	} {
		if strings.Count(s, kv[0]) != 1 {
			t.Fatalf("playbooks/memory.yml: %q is not there once", kv[0])
		}
		s = strings.Replace(s, kv[0], kv[1], 1)
	}
	return s
}

// TestPatroniMembersLeftAlone: on a real three-member Patroni cluster in
// pause (maintenance) mode, check shows each member as Patroni-managed
// and plans no edit of the postgresql.conf Patroni generates and no
// restart; apply refuses every member, naming why, and changes nothing:
// files, postmasters and Patroni's history stay as they were. (Unpaused
// members are rolled out through Patroni: modules/pgconf/patronitest.)
func TestPatroniMembersLeftAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: etcd, Patroni, PostgreSQL and the kernel")
	}
	kernel := testhost.LockKernel(t)
	pc := testhost.Patroni(t, 3)
	pc.SetPaused(t, true)
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

	// The default policy, with the two preflights whose verdict would be
	// this machine's free memory and load (not what this test is about)
	// made to pass: min_available 0 and max_committed 1.
	book := filepath.Join(work, "memory.yml")
	writeFile(t, book, defaultPolicyWithoutPreflights(t))

	code, r, stderr := pgtune(t, "check", "-i", inv, book)
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

	code, r, stderr = pgtune(t, "apply", "--yes", "-i", inv, book)
	if code != 1 {
		t.Fatalf("apply exit %d, want 1\n%s", code, stderr)
	}
	for _, h := range r.Hosts {
		if h.Status != "failed" || h.Error == nil || !strings.Contains(*h.Error, "managed by Patroni") ||
			!strings.Contains(*h.Error, "paused") || !strings.Contains(*h.Error, "restart") {
			t.Errorf("%s: apply status %s, error %v; want a refusal naming what it would have done", h.Name, h.Status, h.Error)
		}
		if len(h.Changes) != 0 {
			t.Errorf("%s: apply changed %v", h.Name, changeSet(h.Changes))
		}
	}
	for name, c := range members {
		after := snapshot(t, c, c.DataDir)
		if after.PID != before[name].PID {
			t.Errorf("%s: postmaster restarted (pid %d → %d)", name, before[name].PID, after.PID)
		}
		for p, content := range before[name].Files {
			if after.Files[p] != content {
				t.Errorf("%s: %s changed", name, p)
			}
		}
		if len(after.Files) != len(before[name].Files) {
			t.Errorf("%s: files appeared: %d → %d", name, len(before[name].Files), len(after.Files))
		}
		if _, err := os.Stat(filepath.Join(c.DataDir, "conf.d")); err == nil {
			t.Errorf("%s: conf.d created", name)
		}
	}
	if h := pc.History(t); len(h) != 0 {
		t.Errorf("Patroni history after apply: %s (a failover?)", h)
	}
	for k, v := range before[pc.Members[0].Name].Kernel {
		if got, _ := testhost.ReadSysctl(k); got != v {
			t.Errorf("kernel %s changed: %s → %s", k, v, got)
		}
	}
	_ = kernel
}

// logLines calls fn with the time stamp and text of each line of c's
// server log that starts with one; fn returns false to stop.
func logLines(t *testing.T, c *testhost.Cluster, fn func(ts time.Time, line string) bool) {
	t.Helper()
	for _, l := range strings.Split(c.Log(t), "\n") {
		if len(l) < 23 {
			continue
		}
		ts, err := time.Parse("2006-01-02 15:04:05.000", l[:23])
		if err != nil {
			continue
		}
		if !fn(ts, l) {
			return
		}
	}
}

// logTimes returns when the server last received a shutdown request and
// when it last said it accepts connections, from its log.
func logTimes(t *testing.T, c *testhost.Cluster) (down, up time.Time) {
	t.Helper()
	logLines(t, c, func(ts time.Time, l string) bool {
		switch {
		case strings.Contains(l, "shutdown request"):
			down = ts
		case strings.Contains(l, "database system is ready to accept"):
			up = ts
		}
		return true
	})
	return down, up
}

// checkRestartOrder checks that the members named in order were each
// restarted (their start time is not the one in started), went down only
// after the one before was back, and run on huge pages.
func checkRestartOrder(t *testing.T, order []string, members map[string]*testhost.Cluster, started map[string]string) {
	t.Helper()
	var prevUp time.Time
	for i, name := range order {
		c := members[name]
		down, up := logTimes(t, c)
		if c.Query(t, "SELECT pg_postmaster_start_time()") == started[name] {
			t.Errorf("%s was not restarted", name)
		}
		if i > 0 && !down.After(prevUp) {
			t.Errorf("%s went down at %s, before %s was back (%s)", name, down.Format(time.StampMilli), order[i-1], prevUp.Format(time.StampMilli))
		}
		prevUp = up
		if hp := c.HugetlbPages(t); hp <= 0 {
			t.Errorf("%s: not on huge pages", name)
		}
	}
}

// TestRestartOrderStreaming takes a real primary and two standbys (made
// with pg_basebackup, streaming on loopback) to the policy: facts groups
// them into one cluster; apply restarts standby1, then standby2, then the
// primary, each standby back before the next member goes down (from the
// servers' logs); every member ends on huge pages and streaming.
func TestRestartOrderStreaming(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: three PostgreSQL servers and the kernel")
	}
	// All three share this machine's pool: reserve room for three small
	// segments beside whatever the pool holds now, and give each member a
	// third.
	set := testhost.StreamingReplication(t, 2)
	pool, perMember := reserveMemberPools(t, set.Members())
	work := t.TempDir()
	members := map[string]*testhost.Cluster{"primary": set.Primary, "standby1": set.Standbys[0], "standby2": set.Standbys[1]}
	inv := localMembers(t, work, members, "")
	book := filepath.Join(work, "book.yml")
	writeFile(t, book, fmt.Sprintf(`- name: cluster order under test
  hosts: all
  policy:
    hugepages:
      pool: %d
      sysctl_file: "${vars.sysctl_dir}/10-hugepages.conf"
    pgconf:
      pool: %d
      primary: restart
`, pool, perMember))

	// facts: one cluster, the primary and both standbys.
	var out, errOut bytes.Buffer
	app := newApp()
	app.Stdout, app.Stderr = &out, &errOut
	if code := app.Run([]string{"facts", "-i", inv}); code != 0 {
		t.Fatalf("facts: exit %d\n%s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "clusters:\n  cluster ") || !strings.Contains(out.String(), ": primary primary, standbys standby1, standby2\n") {
		t.Errorf("facts does not group the three into one cluster:\n%s", out.String())
	}
	if strings.Contains(out.String(), testhost.ReplicaPassword) {
		t.Errorf("facts shows primary_conninfo's password")
	}

	code, planned, stderr := pgtune(t, "check", "-i", inv, book)
	if code != 2 {
		t.Fatalf("check: exit %d\n%+v\n%s", code, planned, stderr)
	}
	for _, h := range planned.Hosts {
		if !strings.Contains(strings.Join(h.Notes, "\n"), "replication cluster ") {
			t.Errorf("%s: check does not say which cluster it is in: %q", h.Name, h.Notes)
		}
	}
	started := map[string]string{}
	for name, c := range members {
		started[name] = c.Query(t, "SELECT pg_postmaster_start_time()")
	}

	code, applied, stderr := pgtune(t, "apply", "--yes", "-i", inv, book)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%+v\n%s", code, applied, stderr)
	}
	for _, h := range applied.Hosts {
		if h.Status != "changed" {
			t.Errorf("%s: status %s", h.Name, h.Status)
		}
	}
	order := []string{"standby1", "standby2", "primary"}
	checkRestartOrder(t, order, members, started)
	set.WaitStreaming(t)
}
