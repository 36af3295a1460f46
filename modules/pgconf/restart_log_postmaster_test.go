package pgconf

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestRestartLogOfPostmasterNamedServer (review h104): a server started
// as /usr/bin/postmaster (RHEL's postgresql.service up to 15) has comm
// "postmaster"; facts takes it for the postmaster, so the restart must
// find its log too rather than fall back to pgtune-startup.log.
func TestRestartLogOfPostmasterNamedServer(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("starts a process as root")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	postmaster := filepath.Join(testhost.OwnedDir(t, "root"), "postmaster")
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(postmaster, b, 0o755); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	logf := filepath.Join(root, "server.log")
	f, err := os.OpenFile(logf, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := exec.Command(postmaster, "60")
	p.Stderr = f
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Process.Kill(); _ = p.Wait() }()
	if err := os.WriteFile(filepath.Join(data, "postmaster.pid"), []byte(strconv.Itoa(p.Process.Pid)+"\n"+data+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", restartScript, "sh", "true", data, filepath.Join(root, "bin"), "root",
		"15", "", "", "0", "1", "restart", "", "test-run", restartInner)
	cmd.Env = append(os.Environ(), "TMPDIR="+root)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("restart script: %v\n%s", err, out)
	}
	if want := "\nlog=" + logf + "\n"; !strings.Contains("\n"+string(out), want) {
		t.Errorf("output lacks %q:\n%s", strings.TrimSpace(want), out)
	}
}
