// Package e2e runs the pgtune binary, built from cmd/pgtune, against real
// components: sshd on 127.0.0.1, PostgreSQL 15 clusters (streaming and
// Patroni), real users and this machine's kernel. These tests live apart
// from cmd/pgtune's unit and acceptance tests, which run the CLI
// in-process, so that neither test binary comes near go test's timeout and
// the two can run side by side.
package e2e

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pgtune/pgtune/internal/clitest"
	"github.com/pgtune/pgtune/internal/testenv"
)

// pgtuneBin is the binary TestMain built for this run ("" under -short,
// where every test here skips before running it).
var pgtuneBin string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

// run is TestMain's work, with its clean-up deferred (os.Exit skips
// defers): the scratch home (testenv: this machine's ssh and Ansible
// configuration, agent and run state stay out of the tests and the
// binary they run) and the binary's directory go when the tests end.
func run(m *testing.M) int {
	done, err := testenv.Isolate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer done()
	if testing.Short() {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "pgtune-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	pgtuneBin = filepath.Join(dir, "pgtune")
	// Linked to read neither /etc/ssh/ssh_config nor
	// /etc/ansible/ansible.cfg (syspaths), as the in-process tests do;
	// without a VCS stamp, which would ask git, and git the scratch
	// home's .gitconfig whether it may read a clone another user owns.
	out, err := exec.Command("go", "build", "-buildvcs=false", "-ldflags", testenv.LDFlags, "-o", pgtuneBin, "github.com/pgtune/pgtune/cmd/pgtune").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build cmd/pgtune: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// buildPgtune returns the pgtune binary, for tests that run it as a
// process of their own and signal it.
func buildPgtune(t *testing.T) string {
	t.Helper()
	if pgtuneBin == "" {
		t.Fatal("e2e: no pgtune binary (TestMain builds it unless -short)")
	}
	return pgtuneBin
}

// App is pgtune as the tests here run it: a process of the built binary
// with the test's standard streams, as an operator's shell runs it. Its
// stdin is never a terminal; IsTerminal, which the in-process App of
// cmd/pgtune takes, must say so.
type App struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	IsTerminal     func() bool
}

func newApp() *App {
	return &App{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
}

// Run runs pgtune with args and returns its exit code (-1 when a signal
// ended it).
func (a *App) Run(args []string) int {
	if a.IsTerminal != nil && a.IsTerminal() {
		panic("e2e: pgtune runs as a process whose stdin is not a terminal")
	}
	if pgtuneBin == "" {
		panic("e2e: no pgtune binary (TestMain builds it unless -short)")
	}
	cmd := exec.Command(pgtuneBin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.Stdin, a.Stdout, a.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	default:
		panic(fmt.Sprintf("e2e: run %s: %v", pgtuneBin, err))
	}
}

// The JSON report, snapshots and inventory entries are internal/clitest's,
// shared with cmd/pgtune.
type (
	jsonReport = clitest.Report
	jsonChange = clitest.Change
	hostState  = clitest.HostState
)

var (
	snapshot  = clitest.Snapshot
	changeSet = clitest.ChangeSet
	targets   = clitest.Targets
	sshdHost  = clitest.SSHDHost
	writeFile = clitest.WriteFile
)

// exitInterrupted is the exit code of a run stopped by Ctrl-C (DESIGN.md).
const exitInterrupted = 130

// pgtune runs the CLI binary and decodes its JSON report.
func pgtune(t *testing.T, args ...string) (int, jsonReport, string) {
	t.Helper()
	return clitest.RunJSON(t, func(stdin io.Reader, stdout, stderr io.Writer, args []string) int {
		app := newApp()
		app.Stdin, app.Stdout, app.Stderr = stdin, stdout, stderr
		app.IsTerminal = func() bool { return false }
		return app.Run(args)
	}, args...)
}
