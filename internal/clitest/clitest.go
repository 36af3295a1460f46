// Package clitest holds what the CLI's two test suites share: cmd/pgtune's,
// which runs the CLI in-process, and cmd/pgtune/e2e's, which runs the built
// binary. Both read pgtune's JSON report the way a consumer does, snapshot
// what a check must leave alone, write inventory entries for a test sshd,
// and read a run's state file.
package clitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/rollout"
	"github.com/pgtune/pgtune/internal/testhost"
)

// Report is the JSON contract of DESIGN.md, as a consumer reads it.
type Report struct {
	Hosts []struct {
		Name    string   `json:"name"`
		Status  string   `json:"status"`
		Changes []Change `json:"changes"`
		Error   *string  `json:"error"`
		Notes   []string `json:"notes"`
	} `json:"hosts"`
	Summary map[string]int `json:"summary"`
}

// Change is one entry of a host's "changes".
type Change struct {
	Module string `json:"module"`
	Target string `json:"target"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// Runner runs pgtune with args on the given streams (stdin never a
// terminal) and returns its exit code.
type Runner func(stdin io.Reader, stdout, stderr io.Writer, args []string) int

// RunJSON runs pgtune with --format json and decodes its report; stdout
// that is not a report fails the test with both streams.
func RunJSON(t testing.TB, run Runner, args ...string) (int, Report, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(strings.NewReader(""), &stdout, &stderr, append(args, "--format", "json"))
	var r Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("pgtune %s: exit %d, stdout is not a JSON report (%v):\n%s\nstderr:\n%s", strings.Join(args, " "), code, err, stdout.String(), stderr.String())
	}
	return code, r, stderr.String()
}

// HostState is everything check must leave alone.
type HostState struct {
	Kernel map[string]string // testhost.Keys
	Files  map[string]string // configuration files under the dirs given
	PID    int               // the postmaster's
}

// Snapshot reads c's postmaster PID, the kernel settings pgtune manages and
// the configuration files under dirs.
func Snapshot(t testing.TB, c *testhost.Cluster, dirs ...string) HostState {
	t.Helper()
	s := HostState{Kernel: map[string]string{}, Files: map[string]string{}, PID: c.PID(t)}
	for _, k := range testhost.Keys {
		v, err := testhost.ReadSysctl(k)
		if err != nil {
			t.Fatal(err)
		}
		s.Kernel[k] = v
	}
	for _, d := range dirs {
		_ = filepath.Walk(d, func(p string, info os.FileInfo, err error) error {
			// Configuration, not the server's own state: the postmaster
			// rewrites postmaster.pid and postmaster.opts at every start.
			name := filepath.Base(p)
			if err == nil && info.Mode().IsRegular() && !strings.Contains(p, "/pg_") && !strings.Contains(p, "/base/") &&
				!strings.Contains(p, "/global/") && !strings.HasPrefix(name, "postmaster.") && !strings.HasSuffix(name, ".log") {
				b, _ := os.ReadFile(p)
				s.Files[p] = string(b)
			}
			return nil
		})
	}
	return s
}

// ChangeSet renders changes one per line, sorted, for comparing runs.
func ChangeSet(cs []Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = fmt.Sprintf("%s %s: %q → %q", c.Module, c.Target, c.Before, c.After)
	}
	sort.Strings(out)
	return out
}

// Targets is the set of "module target" the changes touch.
func Targets(cs []Change) map[string]bool {
	m := map[string]bool{}
	for _, c := range cs {
		m[c.Module+" "+c.Target] = true
	}
	return m
}

// SSHDHost is an inventory host entry (YAML, under a group's hosts:)
// reaching this machine as root through the test sshd s; extra lines are
// further host keys.
func SSHDHost(name string, s *testhost.SSHServer, extra ...string) string {
	lines := []string{
		"        " + name + ":",
		"          ssh_host: 127.0.0.1",
		"          ssh_port: " + strconv.Itoa(s.Port),
		"          ssh_user: root",
		"          ssh_private_key_file: " + s.KeyFile,
		"          ssh_known_hosts_file: " + s.KnownHostsFile,
	}
	for _, e := range extra {
		lines = append(lines, "          "+e)
	}
	return strings.Join(lines, "\n") + "\n"
}

// WriteFile writes content to p (mode 0644) or fails the test.
func WriteFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// HostStates is each host's state in a run's state file, by name.
func HostStates(st *rollout.State) map[string]string {
	out := map[string]string{}
	for _, h := range st.Hosts {
		out[h.Name] = h.State
	}
	return out
}
