package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestKilledMidApply kills the controller — a real pgtune process driving
// this machine through a real sshd, a real PostgreSQL 15 and the real
// kernel — in the middle of apply: with SIGKILL right after the huge page
// file is written, then with SIGTERM followed by SIGKILL while postgres is
// down inside its restart. After each kill no managed file is half
// written, no temporary is left, and postgres is running (the restart,
// once begun, completes on the host without the controller). The next
// apply converges and verifies, and check then finds the host in policy.
func TestKilledMidApply(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd, PostgreSQL and kernel")
	}
	start := time.Now()
	bin := buildPgtune(t)
	kernel := testhost.LockKernel(t)
	sshd := testhost.SSHD(t)
	pg := testhost.Postgres(t)
	t.Logf("%s: built, locked, sshd and postgres up", time.Since(start))
	work := t.TempDir()
	sysctlDir := filepath.Join(work, "sysctl.d")
	stateDir := filepath.Join(work, "state")
	flag := filepath.Join(work, "postgres-down")
	hook := restartHook(t, work, pg, flag, 3)

	inv := filepath.Join(work, "inventory.yml")
	writeFile(t, inv, "all:\n  children:\n    postgres:\n      hosts:\n"+sshdHost("db1", sshd,
		"pg_data: "+pg.DataDir, "pg_bin: "+pg.BinDir, "pg_restart: sh "+hook)+
		fmt.Sprintf("      vars:\n        sysctl_dir: %s\n        pgtune_state_dir: %s\n", sysctlDir, stateDir))
	pool := (kernel.Meminfo["HugePages_Total"] + 64) * kernel.Meminfo["Hugepagesize"] * 1024
	book := filepath.Join(work, "memory.yml")
	writeFile(t, book, fmt.Sprintf(`- name: memory policy under test
  hosts: postgres
  policy:
    hugepages:
      pool: %d
      sysctl_file: "${vars.sysctl_dir}/10-hugepages.conf"
    pgconf:
      restart: true
    overcommit:
      ratio: 0.8
      headroom: "${8 * GiB}"
      sysctl_file: "${vars.sysctl_dir}/99-overcommit.conf"
`, pool))

	code, planned, stderr := pgtune(t, "check", "-i", inv, book)
	if code != 2 {
		t.Fatalf("check: exit %d, want 2\n%s", code, stderr)
	}
	t.Logf("%s: checked", time.Since(start))
	files := managedFiles(planned)
	if len(files) < 3 {
		t.Fatalf("plan writes %d files, want the two sysctl files and the drop-in: %v", len(files), changeSet(planned.Hosts[0].Changes))
	}
	dirs := []string{sysctlDir, pg.DataDir}
	firstPID := pg.PID(t)
	args := []string{"apply", "--yes", "-i", inv, book}

	t.Run("SIGKILL after the huge page file is written", func(t *testing.T) {
		p := startPgtune(t, bin, args...)
		waitFor(t, "10-hugepages.conf", p, 3*time.Minute, func() bool { return exists(filepath.Join(sysctlDir, "10-hugepages.conf")) })
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		checkWhole(t, files, dirs...)
		if pid := waitPostgresUp(t, pg, 10*time.Second); pid != firstPID {
			t.Errorf("postgres was restarted (pid %d → %d) before pgconf ran", firstPID, pid)
		}
	})

	t.Run("SIGTERM then SIGKILL while postgres is down", func(t *testing.T) {
		p := startPgtune(t, bin, args...)
		waitFor(t, "the restart hook's stop", p, 3*time.Minute, func() bool { return exists(flag) })
		if pg.Running() {
			t.Fatal("the hook signalled before postgres was down")
		}
		// SIGTERM cancels the run (pgtune kills its remote commands);
		// the SIGKILL a second later ends pgtune before it can do
		// anything about the restart. The restart must finish anyway.
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		time.Sleep(time.Second)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		pid := waitPostgresUp(t, pg, 60*time.Second)
		if pid == firstPID {
			t.Error("postgres runs its old postmaster: the restart did not happen")
		}
		checkWhole(t, files, dirs...)
		// The restart marker goes once the server is back.
		deadline := time.Now().Add(10 * time.Second)
		for {
			m, _ := filepath.Glob(filepath.Join(stateDir, "restart-pending*"))
			if len(m) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("restart marker left behind: %v", m)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	// A host where a restart never brought postgres back (the host lost
	// its restart half-way): the server is down and pgtune's restart
	// marker is still there. The next apply must start it, not call a
	// stopped server in policy.
	pg.Stop(t)
	marker := filepath.Join(stateDir, "restart-pending"+strings.ReplaceAll(pg.DataDir, "/", "%"))
	writeFile(t, marker, "run=interrupted-test-run\ndata="+pg.DataDir+"\n")
	t.Logf("%s: kills done", time.Since(start))

	// The next apply converges and verifies; check then exits 0.
	code, applied, stderr := pgtune(t, "apply", "--yes", "-v", "-i", inv, book)
	t.Logf("%s: converging apply done", time.Since(start))
	if code != 0 {
		t.Fatalf("apply after the kills: exit %d %+v\n%s\nserver log:\n%s", code, applied, stderr, pg.Log(t))
	}
	if code, r, stderr := pgtune(t, "check", "-i", inv, book); code != 0 {
		t.Fatalf("check after the kills: exit %d, %v\n%s", code, changeSet(r.Hosts[0].Changes), stderr)
	}
	for p, s := range files {
		if b, err := os.ReadFile(p); err != nil || string(b) != s.after {
			t.Errorf("%s after converging: %q, %v", p, b, err)
		}
	}
	if v := pg.Query(t, "SHOW huge_pages"); v != "on" {
		t.Errorf("huge_pages = %s after converging", v)
	}
	if hp := pg.HugetlbPages(t); hp <= 0 {
		t.Errorf("postmaster HugetlbPages = %d kB: not on huge pages", hp)
	}
	if exists(marker) {
		t.Error("restart marker still there after postgres was started")
	}
	if left := strayTemps(dirs...); len(left) > 0 {
		t.Errorf("temporary files: %s", strings.Join(left, ", "))
	}
}
