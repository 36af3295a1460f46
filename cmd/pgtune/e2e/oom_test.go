package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestOOMApplyRollback runs the oom policy through the CLI on this
// machine (local connection) against a real cluster whose postmaster was
// started with PG_OOM_ADJUST_FILE: apply sets the running postmaster's
// oom_score_adj live and verifies it, check is then in policy, a backend
// still runs at 0, and rollback puts the previous value back on that same
// process. postmaster_score_adj is what root may set on this machine:
// -500 where it has CAP_SYS_RESOURCE; 300 where it lacks it (a
// container's root), since the kernel then refuses any lowering
// (modules/oom and modules/pgconf test that path). Not 300 everywhere:
// written with the capability, a score is also the postmaster's floor,
// which its backends inherit and cannot reset below.
func TestOOMApplyRollback(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	// check and apply gather this machine's facts: held still meanwhile.
	testhost.WatchKernel(t)
	// The postmaster inherits this test process's oom_score_adj (a shell,
	// a unit or a CI runner may have set one): its value before the policy
	// is that, not 0.
	inherited := strconv.Itoa(testhost.OOMScoreAdj(t))
	shield := "300"
	if testhost.CanLowerOOMScoreAdj(t) {
		shield = "-500"
	}
	c := testhost.Postgres(t)
	c.AsOwner(t, "env", "PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj", "PG_OOM_ADJUST_VALUE=0",
		filepath.Join(c.BinDir, "pg_ctl"), "-D", c.DataDir, "-l", c.LogFile, "-w", "-t", "60", "restart")
	c.WaitReady(t)
	pid := c.PID(t)
	adj := func() string {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/oom_score_adj")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	work := t.TempDir()
	inv := filepath.Join(work, "inventory.yml")
	writeFile(t, inv, "all:\n  hosts:\n    db1:\n      connection: local\n      pg_data: "+c.DataDir+
		"\n      pgtune_state_dir: "+filepath.Join(work, "runs")+"\n")
	book := filepath.Join(work, "oom.yml")
	writeFile(t, book, "- hosts: all\n  policy:\n    oom:\n      postmaster_score_adj: "+shield+"\n")
	run := func(wantCode int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		app := newApp()
		app.Stdin, app.Stdout, app.Stderr = strings.NewReader(""), &out, &errOut
		app.IsTerminal = func() bool { return false }
		if code := app.Run(args); code != wantCode {
			t.Fatalf("pgtune %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, wantCode, out.String(), errOut.String())
		}
		return out.String()
	}

	target := "postmaster pid " + strconv.Itoa(pid) + " oom_score_adj: " + inherited + " → " + shield
	if out := run(2, "check", "-i", inv, book); !strings.Contains(out, target) {
		t.Fatalf("check does not plan %q:\n%s", target, out)
	}
	run(0, "apply", "--yes", "-i", inv, book)
	if got := adj(); got != shield {
		t.Fatalf("after apply the postmaster runs at %s, want %s", got, shield)
	}
	if got := c.Query(t, "SELECT pg_read_file('/proc/self/oom_score_adj')"); strings.TrimSpace(got) != "0" {
		t.Errorf("a backend runs at %s, want 0", got)
	}
	run(0, "check", "-i", inv, book)
	out := run(0, "rollback", "--yes", "-i", inv)
	if !strings.Contains(out, "oom_score_adj:postmaster:"+strconv.Itoa(pid)+":") {
		t.Errorf("rollback does not name the postmaster's value:\n%s", out)
	}
	if got := adj(); got != inherited {
		t.Errorf("after rollback the postmaster runs at %s, want %s, the inherited value", got, inherited)
	}
}
