package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/internal/testhost"
)

// endMarker ends every answer: psql echoes it after the statement, so a
// multi-line result (EXPLAIN) is read up to it and never past it.
const endMarker = "__pgtune_bench_end__"

// session is one psql process held open, so its backend stays alive with
// the page tables it built.
type session struct {
	pid   int // the backend's PID, not psql's
	stdin io.WriteCloser
	out   *bufio.Reader
	cmd   *exec.Cmd
}

func openSession(tb testing.TB, pg *testhost.Cluster) *session {
	tb.Helper()
	cmd := exec.Command("runuser", "-u", pg.Owner, "--", filepath.Join(pg.BinDir, "psql"),
		"-X", "-q", "-A", "-t", "-h", pg.SocketDir, "-p", strconv.Itoa(pg.Port), "-d", "postgres")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout // errors arrive in order with the answers
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	s := &session{stdin: stdin, out: bufio.NewReader(stdout), cmd: cmd}
	tb.Cleanup(s.close)
	lines, err := s.exec("SELECT pg_backend_pid();")
	if err != nil || len(lines) != 1 {
		tb.Fatalf("psql session: %q, %v", lines, err)
	}
	if s.pid, err = strconv.Atoi(lines[0]); err != nil {
		tb.Fatalf("psql session: backend pid %q", lines[0])
	}
	return s
}

// exec runs one statement and returns its output lines; an ERROR or FATAL
// line makes it an error.
func (s *session) exec(sql string) ([]string, error) {
	if _, err := io.WriteString(s.stdin, sql+"\n\\echo "+endMarker+"\n"); err != nil {
		return nil, fmt.Errorf("psql: write: %w", err)
	}
	var lines []string
	var failed []string
	for {
		line, err := s.out.ReadString('\n')
		if err != nil {
			return lines, fmt.Errorf("psql: read after %q: %w", lines, err)
		}
		line = strings.TrimRight(line, "\n")
		if line == endMarker {
			break
		}
		if strings.Contains(line, "ERROR:") || strings.Contains(line, "FATAL:") {
			failed = append(failed, line)
		}
		lines = append(lines, line)
	}
	if len(failed) > 0 {
		return lines, fmt.Errorf("psql %q: %s", sql, strings.Join(failed, "; "))
	}
	return lines, nil
}

func (s *session) close() {
	s.stdin.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// vmPTE is VmPTE from /proc/PID/status in kB: the page tables of that one
// process, whatever the rest of the machine does.
func vmPTE(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmPTE:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmPTE in /proc/%d/status", pid)
}
