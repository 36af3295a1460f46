package pgconf

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestRestartLogOnlyFromOwnersPostgres: the log restartScript reports is
// the stderr of the PID in postmaster.pid only when that is a postgres
// process of the cluster owner. postmaster.pid is the owner's file: a PID
// of another user's process, or of one not postgres, must not make root
// name the file it writes to (audit h98).
func TestRestartLogOnlyFromOwnersPostgres(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("starts processes as root and as nobody")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	nobody, err := strconv.Atoi(testhost.UID(t, "nobody"))
	if err != nil {
		t.Fatal(err)
	}
	// A process called postgres: sleep under that name, where nobody
	// can run it.
	postgres := filepath.Join(testhost.OwnedDir(t, "root"), "postgres")
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(postgres, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// And one called postmaster: RHEL's postgresql.service started
	// /usr/bin/postmaster up to 15, and facts takes it for the postmaster
	// (review h104).
	postmaster := filepath.Join(filepath.Dir(postgres), "postmaster")
	if err := os.WriteFile(postmaster, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		prog    string
		uid     int
		wantLog bool
	}{
		{"the owner's postgres", postgres, 0, true},
		{"the owner's postgres started as postmaster", postmaster, 0, true},
		{"another user's postgres", postgres, nobody, false},
		{"the owner's process, not postgres", sleep, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			data := filepath.Join(root, "data")
			if err := os.Mkdir(data, 0o700); err != nil {
				t.Fatal(err)
			}
			// The file the process writes its stderr to: root's alone.
			secret := filepath.Join(root, "root-only.log")
			f, err := os.OpenFile(secret, os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			p := exec.Command(tc.prog, "60")
			p.Stderr = f
			p.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(tc.uid), Gid: uint32(tc.uid)}}
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Process.Kill(); _ = p.Wait() }()
			if err := os.WriteFile(filepath.Join(data, "postmaster.pid"), []byte(strconv.Itoa(p.Process.Pid)+"\n"+data+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			// The owner is root (the test's user); pg_restart does nothing
			// and the wait for readiness gives up after 1 s.
			cmd := exec.Command("sh", "-c", restartScript, "sh", "true", data, filepath.Join(root, "bin"), "root",
				"15", "", "", "0", "1", "restart", "", "test-run", restartInner)
			cmd.Env = append(os.Environ(), "TMPDIR="+root)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("restart script: %v\n%s", err, out)
			}
			want := "\nlog=" + filepath.Join(data, "pgtune-startup.log") + "\n"
			if tc.wantLog {
				want = "\nlog=" + secret + "\n"
			}
			if !strings.Contains("\n"+string(out), want) {
				t.Errorf("output lacks %q:\n%s", strings.TrimSpace(want), out)
			}
		})
	}
}
