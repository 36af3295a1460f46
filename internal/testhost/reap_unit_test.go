package testhost

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestTmpDir(t *testing.T) {
	for _, c := range []struct {
		path string
		want bool
	}{
		{"/tmp/pgtune-pg-123", true},
		{"/var/tmp/pgtune-sshd-1", true},
		{"/tmp/pgtune-test-tmp-9/pgtune-sshd-1", true},
		{"/tmp/pgtune-test-tmp-9/x/pgtune-sshd-1", false},
		{"/tmp/other", false},
		{"/tmp", false},
		{"/etc/pgtune-x", false},
		{"/", false},
		{"pgtune-pg-1", false},
		{"/home/pgtune-test-tmp-1/pgtune-pg-1", false},
	} {
		if got := tmpDir(c.path); got != c.want {
			t.Errorf("tmpDir(%q) = %v, want %v", c.path, got, c.want)
		}
	}
	if os.TempDir() == "/tmp" && tmpDir("/tmp/go-test-script1") {
		t.Error("a directory not named pgtune-* is testhost's")
	}
}

// TestReapProcessChecksIdentity: a recorded PID whose start time is not
// the recorded one names another process (PID reuse): it is not
// signalled. The recorded one is ended, with its group.
func TestReapProcessChecksIdentity(t *testing.T) {
	start := func(script string) (int, string, chan struct{}) {
		cmd := exec.Command("sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
		st, err := procStart(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		return cmd.Process.Pid, st, done
	}
	// It ignores SIGTERM: had the reaper signalled it, it would have
	// killed it before returning.
	pid, st, _ := start(`trap "" TERM; exec sleep 600`)
	n, _ := strconv.Atoi(st)
	if err := reapProcess(record{Kind: "process", PID: pid, Start: strconv.Itoa(n + 1), Name: "sleep"}, t.Logf); err != nil {
		t.Fatal(err)
	}
	if f, err := procStat(pid); err != nil || f[0] == "Z" {
		t.Fatal("a process whose start time is not the recorded one was killed")
	}

	pid, st, done := start("exec sleep 600")
	if err := reapProcess(record{Kind: "process", PID: pid, Start: st, Name: "sleep"}, t.Logf); err != nil {
		t.Fatal(err)
	}
	<-done
}

// TestReapLeavesUnknownRecords: a record this reaper does not know (another
// version's, on a shared machine) is left, and is no error: an error would
// fail every later test until the registry was cleaned by hand.
func TestReapLeavesUnknownRecords(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "000001.json")
	if err := os.WriteFile(rec, []byte(`{"kind":"future"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var logged []string
	if err := reapOwner(dir, func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }); err != nil {
		t.Errorf("reapOwner: %v", err)
	}
	if _, err := os.Stat(rec); err != nil {
		t.Errorf("the unknown record was not left: %v", err)
	}
	if !strings.Contains(strings.Join(logged, "\n"), `unknown kind "future"`) {
		t.Errorf("logged %q", logged)
	}
}
