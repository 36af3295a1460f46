package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// A process named postgres that nobody started from a directory of its own
// (a copy of sleep, its working directory holding PG_VERSION and a name
// carrying terminal escapes) beside a real cluster: facts and check, over
// a real sshd as root, note it, escaped, and go on.
func TestImpostorNotedOverSSH(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real sshd, PostgreSQL and processes")
	}
	// facts and check read this machine's kernel and every process: other
	// packages' tests must not change them mid-read.
	testhost.WatchKernel(t)
	sshd := testhost.SSHD(t)
	pg := testhost.Postgres(t)
	work := t.TempDir()

	dir := testhost.OwnedDir(t, "nobody")
	sleep, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	testhost.WriteOwned(t, "nobody", filepath.Join(dir, "postgres"), string(sleep), 0o755)
	cwd := filepath.Join(dir, "db\x1b[2K\rdb1: in policy")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	testhost.WriteOwned(t, "nobody", filepath.Join(cwd, "PG_VERSION"), "15\n", 0o644)
	pid := testhost.StartAs(t, "nobody", cwd, filepath.Join(dir, "postgres"), "600")
	wantNote := fmt.Sprintf("ignored process %d named \"postgres\" (uid %s, binary %q): no postmaster.pid to read in %q; it was not run",
		pid, testhost.UID(t, "nobody"), filepath.Join(dir, "postgres"), cwd)

	inv := filepath.Join(work, "inventory.yml")
	writeFile(t, inv, fmt.Sprintf(`all:
  hosts:
    db1:
      ssh_host: 127.0.0.1
      ssh_port: %d
      ssh_user: root
      ssh_private_key_file: %s
      ssh_known_hosts_file: %s
      pg_data: %s
  vars:
    sysctl_dir: %s
`, sshd.Port, sshd.KeyFile, sshd.KnownHostsFile, pg.DataDir, filepath.Join(work, "sysctl.d")))
	book := filepath.Join(work, "overcommit.yml")
	writeFile(t, book, `- name: overcommit only
  hosts: ungrouped
  policy:
    overcommit:
      # The preflight's verdict would be what this machine commits.
      max_committed: 1
      sysctl_file: "${vars.sysctl_dir}/99-overcommit.conf"
`)

	run := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		app := newApp()
		app.Stdin = strings.NewReader("")
		app.Stdout, app.Stderr = &stdout, &stderr
		app.IsTerminal = func() bool { return false }
		code := app.Run(args)
		if strings.Contains(stdout.String(), "\x1b") {
			t.Errorf("pgtune %s printed a raw escape:\n%q", args[0], stdout.String())
		}
		return code, stdout.String()
	}

	t.Run("facts json", func(t *testing.T) {
		code, out := run("facts", "-i", inv, "--format", "json")
		var doc struct {
			Hosts []struct {
				Facts struct {
					Postgres *struct {
						DataDir string `json:"data_dir"`
					} `json:"postgres"`
					Ignored []string `json:"postgres_ignored"`
				} `json:"facts"`
				Error *string `json:"error"`
			} `json:"hosts"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Hosts) != 1 {
			t.Fatalf("exit %d, %v:\n%s", code, err, out)
		}
		h := doc.Hosts[0]
		if code != 0 || h.Error != nil || h.Facts.Postgres == nil || h.Facts.Postgres.DataDir != pg.DataDir {
			t.Fatalf("exit %d: %+v", code, h)
		}
		if !hasNote(h.Facts.Ignored, wantNote) {
			t.Errorf("postgres_ignored %q lacks\n%s", h.Facts.Ignored, wantNote)
		}
	})

	t.Run("facts text", func(t *testing.T) {
		code, out := run("facts", "-i", inv)
		if code != 0 || !strings.Contains(out, "ignored:") || !strings.Contains(out, wantNote) {
			t.Errorf("exit %d, output lacks the note %s:\n%s", code, wantNote, out)
		}
	})

	t.Run("check", func(t *testing.T) {
		code, rep, stderr := pgtune(t, "check", "-i", inv, book)
		if code == 1 || len(rep.Hosts) != 1 || rep.Hosts[0].Status == "failed" {
			t.Fatalf("check: exit %d %+v\n%s", code, rep, stderr)
		}
		if !hasNote(rep.Hosts[0].Notes, wantNote) {
			t.Errorf("notes %q lack\n%s", rep.Hosts[0].Notes, wantNote)
		}
	})
}

func hasNote(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
