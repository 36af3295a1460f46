package thp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
	"github.com/pgtune/pgtune/modules/internal/moduletest"
)

// other is a mode the policy allows that differs from cur, so the test
// changes the kernel whatever this machine shows.
func other(cur string) string {
	if cur == Never {
		return Madvise
	}
	return Never
}

// TestIntegrationApplyRollback changes this machine's real transparent
// huge page modes through the runner (check, apply, verify), then rolls
// the run back from its journal and finds the machine exactly as before.
// The boot file goes to a temporary tmpfiles.d directory; the kernel lock
// puts the modes back whatever happens.
func TestIntegrationApplyRollback(t *testing.T) {
	k := testhost.LockKernel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
	defer cancel()
	if _, err := os.Stat(EnabledPath); err != nil {
		// A kernel without THP: the module has nothing to do.
		p, err := New().Check(ctx, moduletest.LocalTarget(t, transport.NewLocal(), New()), DefaultParams())
		if err != nil || p.HasChanges() {
			t.Fatalf("kernel without THP: %v, changes %q", err, moduletest.Changes(p))
		}
		return
	}
	start := k.KeepSysfs(t, EnabledPath, DefragPath)

	// The gathered facts are the kernel's.
	tg := moduletest.LocalTarget(t, transport.NewLocal(), New())
	f, err := hostFacts(tg)
	if err != nil {
		t.Fatal(err)
	}
	if f.Enabled != start[EnabledPath] || f.Defrag != start[DefragPath] || !f.Writable {
		t.Fatalf("facts %+v, kernel %v", f, start)
	}

	work := t.TempDir()
	file := filepath.Join(work, "tmpfiles.d", "pgtune-thp.conf")
	if err := os.Mkdir(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	want := settings{enabled: other(start[EnabledPath]), defrag: other(start[DefragPath]), file: file}
	mods, reg := engine.Registry(New())
	book, err := playbook.Parse("thp.yml", []byte(fmt.Sprintf(
		"- hosts: all\n  policy:\n    thp:\n      enabled: %s\n      defrag: %s\n      tmpfiles_file: %s\n", want.enabled, want.defrag, file)), reg)
	if err != nil {
		t.Fatal(err)
	}
	inv := inventory.Localhost()
	inv.Hosts[0].Vars[engine.StateDirVar] = filepath.Join(work, "state")
	runner := func(id string) *engine.Runner {
		return &engine.Runner{Modules: mods, Forks: 1, Dial: engine.Dial, RunID: id, HostTimeout: time.Minute,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	}
	kernel := func() [2]string {
		e, err1 := testhost.ReadSysfs(EnabledPath)
		d, err2 := testhost.ReadSysfs(DefragPath)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		return [2]string{e, d}
	}
	targets := func(h report.Host) map[string]bool {
		got := map[string]bool{}
		for _, c := range h.Changes {
			got[c.Target] = true
		}
		return got
	}
	wantTargets := func(what string, h report.Host, status report.Status) {
		t.Helper()
		got := targets(h)
		if h.Status != status || h.Error != nil || len(got) != 3 || !got[EnabledPath] || !got[DefragPath] || !got[file] {
			t.Fatalf("%s: status %s, error %v, changes %v", what, h.Status, h.Error, got)
		}
	}

	// Apply: the kernel takes the modes and the boot file is written.
	s, err := runner("20261130T220000Z-thp001").Plan(ctx, inv, book, inv.Hosts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantTargets("check", s.Report("check").Hosts[0], report.Drift)
	if got := kernel(); got != [2]string{start[EnabledPath], start[DefragPath]} {
		t.Fatalf("check changed the kernel: %v", got)
	}
	s.Apply(ctx)
	wantTargets("apply", s.Report("apply").Hosts[0], report.Changed)
	if got := kernel(); got != [2]string{want.enabled, want.defrag} {
		t.Fatalf("after apply the kernel has %v, want %s %s", got, want.enabled, want.defrag)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != render(want) {
		t.Fatalf("%s: %q, %v", file, b, err)
	}

	// The boot file does what a boot does: with the machine's modes put
	// back, systemd-tmpfiles (as systemd-tmpfiles-setup runs it at boot)
	// sets the policy's.
	if tmpfiles, err := exec.LookPath("systemd-tmpfiles"); err == nil {
		if err := testhost.WriteSysfs(EnabledPath, start[EnabledPath]); err != nil {
			t.Fatal(err)
		}
		if err := testhost.WriteSysfs(DefragPath, start[DefragPath]); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.CommandContext(ctx, tmpfiles, "--create", file).CombinedOutput(); err != nil {
			t.Fatalf("systemd-tmpfiles --create %s: %v\n%s", file, err, out)
		}
		if got := kernel(); got != [2]string{want.enabled, want.defrag} {
			t.Fatalf("after systemd-tmpfiles the kernel has %v, want %s %s", got, want.enabled, want.defrag)
		}
	} else {
		t.Logf("no systemd-tmpfiles here: the boot file's effect is not exercised")
	}

	// Rollback: both modes back as they were, the boot file gone.
	rb := runner("20261130T220001Z-thp002").PlanRollback(ctx, inv.Hosts, "")
	defer rb.Close()
	wantTargets("rollback check", rb.Report("check").Hosts[0], report.Drift)
	rb.Apply(ctx)
	wantTargets("rollback", rb.Report("apply").Hosts[0], report.Changed)
	if got := kernel(); got != [2]string{start[EnabledPath], start[DefragPath]} {
		t.Fatalf("after rollback the kernel has %v, want %v", got, start)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("%s after rollback: %v", file, err)
	}
}
