package pgconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// restartRun is restartScript run here, as it runs on a host, with a
// pg_restart command that waits for a file: the restart is in flight
// until the test lets it end.
type restartRun struct {
	cmd     *exec.Cmd
	stdout  io.ReadCloser
	tmp     string // TMPDIR: where the script's own files go
	started string // made by the restart command when it begins
	release string // the restart command ends once this exists
	secret  string // a password in the pg_restart command
}

func startRestartScript(t *testing.T) *restartRun {
	t.Helper()
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &restartRun{
		tmp:     filepath.Join(dir, "tmp"),
		started: filepath.Join(dir, "started"),
		release: filepath.Join(dir, "release"),
	}
	data, bin := filepath.Join(dir, "data"), filepath.Join(dir, "bin")
	for _, d := range []string{r.tmp, data, bin} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	r.secret = fmt.Sprintf("s3cr3t-%d-%d", os.Getpid(), time.Now().UnixNano())
	custom := "PGPASSWORD=" + r.secret + "; export PGPASSWORD; touch " + transport.Quote(r.started) + " && while [ ! -e " + transport.Quote(r.release) + " ]; do sleep 0.05; done"
	// No postmaster.pid, no socket: the wait for readiness gives up
	// after the timeout (1 s); these cases are about the script's files.
	r.cmd = exec.Command("sh", "-c", restartScript, "sh", "1", data, bin, me.Username,
		"15", "", "", "0", "1", "restart", "", "test-run", restartInner)
	r.cmd.Env = append(os.Environ(), "TMPDIR="+r.tmp)
	r.cmd.Stderr = io.Discard
	r.cmd.Stdin = strings.NewReader(custom)
	if r.stdout, err = r.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile(r.release, nil, 0o600)
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	})
	r.waitFor(t, "the restart command to start", func() bool { return exists(r.started) })
	if n := len(r.files(t)); n != 3 {
		t.Fatalf("%d files in TMPDIR while the restart runs, want 3 (pg_restart's output, the report, the command)", n)
	}
	return r
}

func (r *restartRun) files(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(r.tmp, "pgtune-restart.*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// waitFor polls ok up to the hang guard (a slow machine's sleep and
// fork, not a timing expectation).
func (r *restartRun) waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(testhost.HangGuard); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("still waiting for %s after %v", what, testhost.HangGuard)
		}
	}
}

// TestRestartScriptLeavesNoFiles: the script's two temporary files go
// however it ends — normally, killed while it waits for the detached
// restart (a cancelled run's TERM, a KILL), or cut off from its reader (a controller killed mid-restart: the
// script's next write meets a closed pipe).
func TestRestartScriptLeavesNoFiles(t *testing.T) {
	t.Run("normal end", func(t *testing.T) {
		r := startRestartScript(t)
		if err := os.WriteFile(r.release, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(r.stdout)
		if err := r.cmd.Wait(); err != nil {
			t.Fatalf("restart script: %v\n%s", err, out)
		}
		if !bytes.Contains(out, []byte("\nrc=0\n")) {
			t.Errorf("the report lacks the restart's rc=0:\n%s", out)
		}
		if f := r.files(t); len(f) != 0 {
			t.Errorf("left behind: %v", f)
		}
	})

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String()+" while the restart runs", func(t *testing.T) {
			r := startRestartScript(t)
			if err := r.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			// It ends without waiting for the restart, which is held
			// until the test releases it (a cancel must not wait here).
			r.waitFor(t, "the script to end on "+sig.String(), func() bool {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(r.cmd.Process.Pid, &ws, syscall.WNOHANG, nil)
				return pid == r.cmd.Process.Pid || err != nil
			})
			if len(r.files(t)) != 3 {
				t.Fatal("the files went with the killed script, before the restart ended: the case below tests nothing")
			}
			if err := os.WriteFile(r.release, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			r.waitFor(t, "the detached part to remove the files", func() bool { return len(r.files(t)) == 0 })
		})
	}

	t.Run("stdout closed while the restart runs", func(t *testing.T) {
		r := startRestartScript(t)
		_ = r.stdout.Close()
		if err := os.WriteFile(r.release, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		err := r.cmd.Wait()
		if f := r.files(t); len(f) != 0 {
			t.Errorf("left behind: %v", f)
		}
		// It ended through its trap (exit 1), not killed by the signal.
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signaled() {
			t.Errorf("script ended with %v, want exit status 1 from its PIPE trap", err)
		}
	})
}

// TestRestartCommandOnNoCommandLine: the pg_restart command (a password
// in it) reaches the script on stdin and the detached part in a file of
// its own, mode 0600: no process's command line holds it while the
// restart runs, where anyone on the host could read it.
func TestRestartCommandOnNoCommandLine(t *testing.T) {
	r := startRestartScript(t)
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // ended meanwhile
		}
		read++
		if bytes.Contains(b, []byte(r.secret)) {
			t.Errorf("%s holds the pg_restart command", p)
		}
	}
	if read == 0 {
		t.Fatal("no command line read: the check above saw nothing")
	}
	held := 0
	for _, f := range r.files(t) {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte(r.secret)) {
			continue
		}
		held++
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("the command's file %s: mode %v (%v), want 0600", f, fi.Mode(), err)
		}
	}
	if held != 1 {
		t.Errorf("%d files hold the command, want 1", held)
	}
}
