package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/internal/clitest"
	"github.com/pgtune/pgtune/internal/testhost"
	"github.com/pgtune/pgtune/modules/overcommit"
)

// The JSON report, snapshots and inventory entries are internal/clitest's,
// shared with cmd/pgtune/e2e.
type (
	jsonReport = clitest.Report
	jsonChange = clitest.Change
	hostState  = clitest.HostState
)

var (
	snapshot  = clitest.Snapshot
	changeSet = clitest.ChangeSet
	targets   = clitest.Targets
	sshdHost  = clitest.SSHDHost
	writeFile = clitest.WriteFile
)

// pgtune runs the CLI in-process and decodes its JSON report.
func pgtune(t *testing.T, args ...string) (int, jsonReport, string) {
	t.Helper()
	return clitest.RunJSON(t, func(stdin io.Reader, stdout, stderr io.Writer, args []string) int {
		app := newApp()
		app.Stdin, app.Stdout, app.Stderr = stdin, stdout, stderr
		app.IsTerminal = func() bool { return false }
		return app.Run(args)
	}, args...)
}

// TestCheckApplyRollbackOverSSH takes a real host — this machine, reached
// over a real sshd on 127.0.0.1, with a real PostgreSQL 15 cluster from
// initdb — from stock settings to the policy and back, and holds pgtune to
// the whole-run guarantees: check changes nothing and predicts exactly what
// apply changes; apply converges and verifies; a second apply changes
// nothing; rollback restores the host.
func TestCheckApplyRollbackOverSSH(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd, PostgreSQL and kernel")
	}
	// The servers first, the kernel lock after: building them needs no
	// lock (others' kernel tests need not wait on it), and StopOnCleanup
	// stops postgres before the lock goes.
	sshd := testhost.SSHD(t)
	pg := testhost.Postgres(t)
	kernel := testhost.LockKernel(t)
	testhost.StopOnCleanup(t, pg)
	work := t.TempDir()
	sysctlDir := filepath.Join(work, "sysctl.d")

	inv := filepath.Join(work, "inventory.yml")
	writeFile(t, inv, fmt.Sprintf(`all:
  children:
    postgres:
      hosts:
        db1:
          ssh_host: 127.0.0.1
          ssh_port: %d
          ssh_user: root
          ssh_private_key_file: %s
          ssh_known_hosts_file: %s
          pg_data: %s
          pg_bin: %s
      vars:
        sysctl_dir: %s
        pgtune_state_dir: %s
`, sshd.Port, sshd.KeyFile, sshd.KnownHostsFile, pg.DataDir, pg.BinDir, sysctlDir, filepath.Join(work, "state")))

	// A pool with room for a 256 MiB segment (one page of a larger default
	// size) beside what the machine holds now keeps the test small, and
	// the cluster sized to that share, never to pages others hold; the
	// overcommit limit follows the formula with a headroom far above what
	// the machine commits, so strict mode breaks nothing here. Neither
	// preflight's verdict is left to this machine's free memory.
	pool, share := kernel.RoomFor(256 << 20)
	book := filepath.Join(work, "memory.yml")
	writeFile(t, book, fmt.Sprintf(`- name: memory policy under test
  hosts: postgres
  policy:
    overcommit:
      ratio: 0.8
      headroom: "${8 * GiB}"
      # far above what this shared machine commits, hence not protective
      accept_unprotective: true
      max_committed: 1
      sysctl_file: "${vars.sysctl_dir}/99-overcommit.conf"
    pgconf:
      restart: true
      pool: %d
    hugepages:
      pool: %d
      min_available: 0
      sysctl_file: "${vars.sysctl_dir}/10-hugepages.conf"
`, share, pool))

	before := snapshot(t, pg, pg.DataDir, sysctlDir)
	// The limit the policy sets: pools of other page sizes are outside
	// the commit budget too.
	wantKB := overcommit.Limit(kernel.Meminfo["MemTotal"]<<10, pool+kernel.OtherPools(), 0.8, 8<<30)

	// 1. check on a fresh host: drift, exit 2, and the plan names the pool,
	// the drop-in, the restart and the overcommit keys this machine does
	// not have yet (strict mode may be on already, here or elsewhere).
	code, planned, stderr := pgtune(t, "check", "-i", inv, book)
	if code != 2 {
		t.Fatalf("check: exit %d, want 2\n%+v\n%s", code, planned, stderr)
	}
	got := targets(planned.Hosts[0].Changes)
	for target, want := range map[string]bool{
		"hugepages vm.nr_hugepages":                                        true,
		"hugepages " + sysctlDir + "/10-hugepages.conf":                    true,
		"pgconf " + filepath.Join(pg.DataDir, "conf.d/002-hugepages.conf"): true,
		"overcommit vm.overcommit_memory":                                  kernel.Values["vm.overcommit_memory"] != "2",
		"overcommit vm.overcommit_kbytes":                                  kernel.Values["vm.overcommit_kbytes"] != strconv.FormatInt(wantKB, 10),
		"overcommit " + sysctlDir + "/99-overcommit.conf":                  true,
	} {
		if got[target] != want {
			t.Errorf("check plan has %q: %v, want %v (kernel before: %v); plan: %v", target, got[target], want, kernel.Values, changeSet(planned.Hosts[0].Changes))
		}
	}
	restart := false
	for _, c := range planned.Hosts[0].Changes {
		restart = restart || (c.Module == "pgconf" && strings.Contains(c.Target, "restart"))
	}
	if !restart {
		t.Errorf("check plan lacks the postgres restart: %v", changeSet(planned.Hosts[0].Changes))
	}
	if after := snapshot(t, pg, pg.DataDir, sysctlDir); !reflect.DeepEqual(before, after) {
		t.Fatalf("check changed the host:\nbefore %+v\nafter  %+v", before.Kernel, after.Kernel)
	}

	// 2. apply without a terminal and without --yes refuses and changes
	// nothing.
	var out, errOut bytes.Buffer
	app := newApp()
	app.Stdin, app.Stdout, app.Stderr = strings.NewReader("y\n"), &out, &errOut
	app.IsTerminal = func() bool { return false }
	if code := app.Run([]string{"apply", "-i", inv, book}); code != 1 || !strings.Contains(errOut.String(), "--yes") {
		t.Fatalf("apply without --yes: exit %d, stderr %s", code, errOut.String())
	}
	if after := snapshot(t, pg, pg.DataDir, sysctlDir); !reflect.DeepEqual(before, after) {
		t.Fatal("a refused apply changed the host")
	}

	// 3. apply: exit 0, exactly the changes check predicted.
	code, applied, stderr := pgtune(t, "apply", "--yes", "-i", inv, book)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%+v\n%s\nserver log:\n%s", code, applied, stderr, pg.Log(t))
	}
	if h := applied.Hosts[0]; h.Status != "changed" {
		t.Fatalf("apply: status %q, want changed", h.Status)
	}
	if p, a := changeSet(planned.Hosts[0].Changes), changeSet(applied.Hosts[0].Changes); !reflect.DeepEqual(p, a) {
		t.Fatalf("check predicted:\n  %s\napply changed:\n  %s", strings.Join(p, "\n  "), strings.Join(a, "\n  "))
	}

	// The kernel, the files and the running postmaster are on the policy.
	pages := pool / kernel.PageSize()
	if v, _ := testhost.ReadSysctl("vm.nr_hugepages"); v != strconv.FormatInt(pages, 10) {
		t.Errorf("vm.nr_hugepages = %s, want %d", v, pages)
	}
	if v, _ := testhost.ReadSysctl("vm.overcommit_memory"); v != "2" {
		t.Errorf("vm.overcommit_memory = %s, want 2", v)
	}
	if v, _ := testhost.ReadSysctl("vm.overcommit_kbytes"); v != strconv.FormatInt(wantKB, 10) {
		t.Errorf("vm.overcommit_kbytes = %s, want %d (0.8 × (MemTotal − pool − other pools %d) + 8 GiB)", v, wantKB, kernel.OtherPools())
	}
	if b, err := os.ReadFile(filepath.Join(sysctlDir, "10-hugepages.conf")); err != nil || !strings.Contains(string(b), fmt.Sprintf("vm.nr_hugepages = %d", pages)) {
		t.Errorf("10-hugepages.conf: %q, %v", b, err)
	}
	if pg.PID(t) == before.PID {
		t.Error("postmaster was not restarted")
	}
	if hp := pg.HugetlbPages(t); hp <= 0 {
		t.Errorf("postmaster HugetlbPages = %d kB: not on huge pages", hp)
	}
	if v := pg.Query(t, "SHOW huge_pages"); v != "on" {
		t.Errorf("huge_pages = %s", v)
	}

	// 4. Converged: check exits 0, a second apply changes nothing.
	if code, r, stderr := pgtune(t, "check", "-i", inv, book); code != 0 {
		t.Fatalf("check after apply: exit %d, %v\n%s", code, changeSet(r.Hosts[0].Changes), stderr)
	}
	pid := pg.PID(t)
	if code, r, stderr := pgtune(t, "apply", "--yes", "-i", inv, book); code != 0 || r.Hosts[0].Status != "ok" || len(r.Hosts[0].Changes) != 0 {
		t.Fatalf("second apply: exit %d status %s changes %v\n%s", code, r.Hosts[0].Status, changeSet(r.Hosts[0].Changes), stderr)
	}
	if pg.PID(t) != pid {
		t.Error("a second apply restarted postgres")
	}

	// 5. Strict overcommit: a query asking for more than the commit limit
	// leaves gets "out of memory"; the other sessions and the postmaster
	// live on.
	t.Run("out of memory is an error, not a crash", func(t *testing.T) {
		strictOOM(t, pg, inv, work)
	})

	// 6. rollback puts the host back as it was.
	code, rolled, stderr := pgtune(t, "rollback", "--yes", "-i", inv)
	if code != 0 {
		t.Fatalf("rollback: exit %d %+v\n%s\nserver log:\n%s", code, rolled, stderr, pg.Log(t))
	}
	after := snapshot(t, pg, pg.DataDir, sysctlDir)
	if !reflect.DeepEqual(before.Kernel, after.Kernel) {
		t.Errorf("kernel after rollback %v, want %v", after.Kernel, before.Kernel)
	}
	for p, content := range before.Files {
		if after.Files[p] != content {
			t.Errorf("%s differs after rollback", p)
		}
	}
	for p := range after.Files {
		if _, ok := before.Files[p]; !ok {
			t.Errorf("%s left behind by rollback", p)
		}
	}
	if v := pg.Query(t, "SHOW huge_pages"); v != "off" {
		t.Errorf("after rollback huge_pages = %s, want off (testhost's setting)", v)
	}
	if code, r, _ := pgtune(t, "rollback", "--yes", "-i", inv); code != 0 || len(r.Hosts[0].Changes) != 0 {
		t.Errorf("second rollback: exit %d, changes %v", code, changeSet(r.Hosts[0].Changes))
	}
}

// strictOOM tightens the commit limit to what the machine commits now plus
// 1.5 GiB, holds idle sessions open, and runs one query that needs 1 GiB
// more than the limit leaves: in strict mode its allocation fails with
// "out of memory" while every other session stays connected and the
// postmaster is not restarted. The limit is put back before returning.
//
// CommitLimit is overcommit_kbytes plus all of swap, so the swap is taken
// off kbytes (down to 256 MiB: where swap is larger, the limit is higher
// and the query asks more). The query's size comes from the limit and
// what is committed right before it, not from the apply's moment: other
// processes commit and free meanwhile. It holds its memory in many values
// of 400 MB (array_agg keeps each), as PostgreSQL refuses one value of 1
// GB or more with an error of its own, whatever the commit limit.
func strictOOM(t *testing.T, pg *testhost.Cluster, inv, work string) {
	book := filepath.Join(work, "tight.yml")
	writeFile(t, book, `- name: tight commit limit
  hosts: postgres
  policy:
    overcommit:
      kbytes: "${max(floor((facts.committed_as + 1536 * MiB - facts.swap_total) / KiB), 256 * KiB)}"
      # follows what this machine commits and swaps, whatever its size
      accept_unprotective: true
      sysctl_file: "${vars.sysctl_dir}/99-overcommit.conf"
`)
	if code, r, stderr := pgtune(t, "apply", "--yes", "-i", inv, book); code != 0 {
		t.Fatalf("tight apply: exit %d %+v\n%s", code, r, stderr)
	}
	start := pg.Query(t, "SELECT pg_postmaster_start_time()")

	var idle []*psqlSession
	for i := 0; i < 3; i++ {
		idle = append(idle, openPsql(t, pg))
	}
	mem, err := testhost.Meminfo()
	if err != nil {
		t.Fatal(err)
	}
	room := max(mem["CommitLimit"]-mem["Committed_AS"], 0) << 10 // bytes
	const value = 400_000_000
	values := (room+1<<30)/value + 1
	if room > mem["MemAvailable"]<<10/2 {
		// Only a swap much larger than what is committed gets here: the
		// query would push this machine's memory into swap to reach it.
		t.Skipf("the commit limit leaves %d MiB (SwapTotal %d kB), more than half of MemAvailable: not exhausted on this machine", room>>20, mem["SwapTotal"])
	}
	q := fmt.Sprintf("SELECT cardinality(array_agg(repeat('x', %d))) FROM generate_series(1, %d)", value, values)
	out, err := pg.TryQuery(q)
	if err == nil || !strings.Contains(err.Error()+out, "out of memory") {
		t.Fatalf("a query beyond the commit limit (%d MiB left, %s): %q, %v; want ERROR: out of memory", room>>20, q, out, err)
	}
	for i, s := range idle {
		if got := s.query(t, "SELECT 41 + 1;"); got != "42" {
			t.Errorf("idle session %d after the OOM error: %q", i, got)
		}
	}
	if now := pg.Query(t, "SELECT pg_postmaster_start_time()"); now != start {
		t.Errorf("postmaster restarted: start time %s → %s", start, now)
	}
}

type psqlSession struct {
	stdin io.WriteCloser
	out   *bufio.Reader
	cmd   *exec.Cmd
}

// openPsql holds one session open for the test.
func openPsql(t *testing.T, pg *testhost.Cluster) *psqlSession {
	t.Helper()
	cmd := exec.Command("runuser", "-u", pg.Owner, "--", filepath.Join(pg.BinDir, "psql"),
		"-X", "-q", "-At", "-h", pg.SocketDir, "-p", strconv.Itoa(pg.Port), "-d", "postgres")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &psqlSession{stdin: stdin, out: bufio.NewReader(stdout), cmd: cmd}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	if got := s.query(t, "SELECT 'ready';"); got != "ready" {
		t.Fatalf("psql session: %q", got)
	}
	return s
}

func (s *psqlSession) query(t *testing.T, sql string) string {
	t.Helper()
	if _, err := io.WriteString(s.stdin, sql+"\n"); err != nil {
		return "write: " + err.Error()
	}
	line, err := s.out.ReadString('\n')
	if err != nil {
		return "read: " + err.Error()
	}
	return strings.TrimSpace(line)
}
