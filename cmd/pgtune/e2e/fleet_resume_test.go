package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/rollout"
	"github.com/pgtune/pgtune/internal/clitest"
	"github.com/pgtune/pgtune/internal/testhost"
)

// fleetHosts are four inventory hosts behind one real sshd, each with its
// own state directory and sysctl directory, so each has its own file to
// write and its own journals; the playbook keeps the kernel's pool as it is
// (it writes only the file) and rolls out one canary, then the rest.
type fleetHosts struct {
	inv, book, work, xdg string
	names                []string
}

func newFleetHosts(t *testing.T) fleetHosts {
	t.Helper()
	sshd := testhost.SSHD(t)
	// Not root: root's login shell here may source a heavy ~/.bashrc for
	// every command; pgtune-sudo's is sh, and become is what fleets use.
	testhost.EnsureUser(t, "pgtune-sudo", true)
	f := fleetHosts{work: t.TempDir(), names: []string{"h1", "h2", "h3", "h4"}}
	f.xdg = filepath.Join(f.work, "xdg")
	var inv strings.Builder
	inv.WriteString("all:\n  hosts:\n")
	for _, h := range f.names {
		for _, d := range []string{"state", "sysctl"} {
			if err := os.MkdirAll(filepath.Join(f.work, h, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		entry := sshdHost(h, sshd, "become: true",
			"pgtune_state_dir: "+filepath.Join(f.work, h, "state"),
			"sysctl_dir: "+filepath.Join(f.work, h, "sysctl"))
		entry = strings.Replace(entry, "ssh_user: root", "ssh_user: pgtune-sudo", 1)
		inv.WriteString(strings.ReplaceAll(entry, "        ", "    "))
	}
	f.inv = filepath.Join(f.work, "inventory.yml")
	writeFile(t, f.inv, inv.String())
	f.book = filepath.Join(f.work, "fleet.yml")
	writeFile(t, f.book, `- name: pool file, batch by batch
  hosts: all
  serial: [1, "100%"]
  policy:
    hugepages:
      pool: "${(facts.hugepages_total - facts.hugepages_surp) * facts.hugepage_size}"
      sysctl_file: "${vars.sysctl_dir}/10-hugepages.conf"
`)
	return f
}

func (f fleetHosts) file(h string) string {
	return filepath.Join(f.work, h, "sysctl", "10-hugepages.conf")
}

// hostTrace is what a run may leave on a host: its file and every entry of
// its state directory (journals, backups, lock), with their mtimes.
func (f fleetHosts) hostTrace(t *testing.T, h string) string {
	t.Helper()
	var b strings.Builder
	for _, root := range []string{filepath.Join(f.work, h, "state"), filepath.Join(f.work, h, "sysctl")} {
		_ = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err == nil {
				fmt.Fprintf(&b, "%s %s %d\n", p, info.ModTime().Format(time.RFC3339Nano), info.Size())
			}
			return nil
		})
	}
	return b.String()
}

// whole checks that a host's file is absent or complete: an interrupted
// run never leaves half of it.
func (f fleetHosts) whole(t *testing.T, h string) bool {
	t.Helper()
	b, err := os.ReadFile(f.file(h))
	if os.IsNotExist(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^vm\.nr_hugepages = [0-9]+$`).Match(b) || !strings.HasSuffix(string(b), "\n") {
		t.Errorf("%s: %s is not whole: %q", h, f.file(h), b)
	}
	return true
}

// start runs the binary; when a stderr line matches trigger it sends sig
// (once). It returns the exit code and stderr.
func (f fleetHosts) run(t *testing.T, bin string, trigger *regexp.Regexp, sig syscall.Signal, args ...string) (int, string, []byte) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+f.xdg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	sent := false
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		if trigger != nil && !sent && trigger.MatchString(line) {
			sent = true
			_ = cmd.Process.Signal(sig)
		}
	}
	_, _ = io.Copy(io.Discard, stderr)
	err = cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	} else if err != nil {
		t.Fatal(err)
	}
	if trigger != nil && !sent {
		t.Fatalf("pgtune %s: exit %d, never logged %s:\n%s\nstdout:\n%s", strings.Join(args, " "), code, trigger, log.String(), stdout.String())
	}
	return code, log.String(), []byte(stdout.String())
}

func (f fleetHosts) state(t *testing.T) *rollout.State {
	t.Helper()
	st, err := rollout.Load(filepath.Join(f.xdg, "pgtune", "runs"), "")
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(st.Path())
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("state file %s: mode %v, %v; want 0600", st.Path(), info.Mode(), err)
	}
	return st
}

// hostStates is internal/clitest's, shared by the two CLI test suites.
var hostStates = clitest.HostStates

// TestInterruptAndResume: the real binary over a real sshd, four hosts in
// two batches. Ctrl-C while the first host of the second batch applies: that
// host finishes its step, the hosts after it are not started, the state
// is written, exit 130. Then a resume is killed (SIGKILL) mid-batch, and a
// second resume converges every host. Hosts verified before are never
// touched again: their files, journals and locks keep their mtimes.
func TestInterruptAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd and the pgtune binary")
	}
	bin := buildPgtune(t)
	f := newFleetHosts(t)
	testhost.WatchKernel(t) // the hosts read the kernel's pool and verify it holds

	// 1. Ctrl-C while h2 (second batch, one host at a time) applies.
	code, stderr, _ := f.run(t, bin, regexp.MustCompile(`apply.*host=h2`), syscall.SIGINT,
		"apply", "-i", f.inv, f.book, "--yes", "--forks", "1", "-v")
	if code != exitInterrupted {
		t.Fatalf("interrupted apply: exit %d, want %d\n%s", code, exitInterrupted, stderr)
	}
	st := f.state(t)
	if !strings.Contains(stderr, "pgtune apply --resume "+st.ID) {
		t.Errorf("stderr does not say how to resume run %s:\n%s", st.ID, stderr)
	}
	states := hostStates(st)
	if st.Status != rollout.Interrupted || states["h1"] != rollout.Verified || states["h2"] != rollout.Verified {
		t.Fatalf("after Ctrl-C: run %s, hosts %v; want interrupted with h1 (canary) and h2 (in flight) verified\n%s", st.Status, states, stderr)
	}
	if states["h4"] != rollout.NotReached {
		t.Fatalf("after Ctrl-C: h4 is %s, want not reached (the run stops after the step in flight)\n%s", states["h4"], stderr)
	}
	verified := map[string]string{}
	for _, h := range f.names {
		if f.whole(t, h) != (states[h] == rollout.Verified) {
			t.Errorf("after Ctrl-C: %s is %s but its file exists: %v", h, states[h], f.whole(t, h))
		}
		if states[h] == rollout.Verified {
			verified[h] = f.hostTrace(t, h)
		}
	}

	// 2. A resume killed outright while the next host applies.
	var next string
	for _, h := range f.names {
		if states[h] != rollout.Verified {
			next = h
			break
		}
	}
	code, stderr, _ = f.run(t, bin, regexp.MustCompile(`apply.*host=`+next+`\b`), syscall.SIGKILL,
		"apply", "--resume", "--yes", "--forks", "1", "-v")
	if code != 128+int(syscall.SIGKILL) {
		t.Fatalf("killed resume: exit %d\n%s", code, stderr)
	}
	for _, h := range f.names {
		f.whole(t, h)
	}

	// 3. The second resume converges the rest and leaves the verified alone.
	code, stderr, stdout := f.run(t, bin, nil, 0, "apply", "--resume", st.ID, "--yes", "--format", "json")
	var r jsonReport
	if err := json.Unmarshal(stdout, &r); err != nil || code != 0 {
		t.Fatalf("resume: exit %d, report %v:\n%s\n%s", code, err, stdout, stderr)
	}
	st = f.state(t)
	if st.ID != f.state(t).ID || len(st.Attempts) != 3 || st.Status != rollout.Finished {
		t.Errorf("state: id %s, %d attempts, %s; want the first run's id, 3 attempts, finished", st.ID, len(st.Attempts), st.Status)
	}
	for _, h := range f.names {
		if s := hostStates(st)[h]; s != rollout.Verified {
			t.Errorf("%s is %s after the resume, want verified", h, s)
		}
		if !f.whole(t, h) {
			t.Errorf("%s: no file after the resume", h)
		}
	}
	for _, hr := range r.Hosts {
		if hr.Status != "ok" && hr.Status != "changed" {
			t.Errorf("%s: %s after the resume", hr.Name, hr.Status)
		}
		if _, ok := verified[hr.Name]; ok && !strings.Contains(strings.Join(hr.Notes, "\n"), "verified by run "+st.Attempts[0].RunID) {
			t.Errorf("%s: the report does not say run %s verified it: %v", hr.Name, st.Attempts[0].RunID, hr.Notes)
		}
	}
	for h, trace := range verified {
		if now := f.hostTrace(t, h); now != trace {
			t.Errorf("%s was verified by the first run, yet a resume touched it:\nbefore:\n%s\nafter:\n%s", h, trace, now)
		}
	}
}
