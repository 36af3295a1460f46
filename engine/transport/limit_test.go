package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/internal/testhost"
)

// lowerOutputCap sets the cap for one test and puts it back.
func lowerOutputCap(t *testing.T, n int64) {
	t.Helper()
	prev := SetMaxOutput(n)
	t.Cleanup(func() { SetMaxOutput(prev) })
}

func TestCappedWriter(t *testing.T) {
	tests := []struct {
		name     string
		writes   []int
		wantKept int
		wantOver bool
	}{
		{name: "under", writes: []int{3, 4}, wantKept: 7},
		{name: "exactly the cap", writes: []int{5, 5}, wantKept: 10},
		{name: "one byte over", writes: []int{10, 1}, wantKept: 10, wantOver: true},
		{name: "one write across the cap", writes: []int{4, 9}, wantKept: 10, wantOver: true},
		{name: "first write over", writes: []int{50}, wantKept: 10, wantOver: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newOutputLimit(10)
			var buf bytes.Buffer
			w := l.writer("stdout", &buf)
			var err error
			for _, n := range tc.writes {
				if _, err = w.Write(bytes.Repeat([]byte{'x'}, n)); err != nil {
					break
				}
			}
			if buf.Len() != tc.wantKept {
				t.Errorf("kept %d bytes, want %d", buf.Len(), tc.wantKept)
			}
			if l.exceeded() != tc.wantOver || (err != nil) != tc.wantOver {
				t.Fatalf("exceeded %v, write err %v; want over %v", l.exceeded(), err, tc.wantOver)
			}
			if !tc.wantOver {
				return
			}
			got := l.err(Command{Args: []string{"cat", "/dev/zero"}})
			var tooLarge *OutputTooLargeError
			if !errors.Is(got, ErrOutputTooLarge) || !errors.As(got, &tooLarge) || tooLarge.Stream != "stdout" || tooLarge.Limit != 10 {
				t.Fatalf("err = %#v", got)
			}
			if want := "cat /dev/zero: stdout: more than 10 bytes of output, over the cap; the command was stopped"; got.Error() != want {
				t.Errorf("err = %q\nwant  %q", got, want)
			}
		})
	}
}

func TestOutputCapMessage(t *testing.T) {
	for n, want := range map[int64]string{16 << 20: "16 MiB", 64 << 10: "64 KiB", 1000: "1000 bytes", 3<<20 + 1: "3145729 bytes"} {
		if got := formatLimit(n); got != want {
			t.Errorf("formatLimit(%d) = %q, want %q", n, got, want)
		}
	}
	if MaxOutput() != DefaultMaxOutput || DefaultMaxOutput != 16<<20 {
		t.Errorf("default cap %d, want 16 MiB", MaxOutput())
	}
}

// assertTooLarge checks that err is the cap's error for stream, naming the
// command, and that no partial output came back.
func assertTooLarge(t *testing.T, res Result, err error, stream string, limit int64, cmdWord string) {
	t.Helper()
	var tooLarge *OutputTooLargeError
	if !errors.Is(err, ErrOutputTooLarge) || !errors.As(err, &tooLarge) {
		t.Fatalf("err = %v, want ErrOutputTooLarge", err)
	}
	if tooLarge.Stream != stream || tooLarge.Limit != limit || !strings.Contains(err.Error(), cmdWord) {
		t.Errorf("err = %q (stream %s, limit %d), want %s over %d naming %q", err, tooLarge.Stream, tooLarge.Limit, stream, limit, cmdWord)
	}
	if len(res.Stdout)+len(res.Stderr) != 0 {
		t.Errorf("partial output returned: %d + %d bytes", len(res.Stdout), len(res.Stderr))
	}
}

func TestLocalOutputCap(t *testing.T) {
	const limit = 64 << 10
	lowerOutputCap(t, limit)
	l := NewLocal()
	for _, tc := range []struct {
		name, stream string
		args         []string
	}{
		{name: "stdout", stream: "stdout", args: []string{"cat", "/dev/zero"}},
		{name: "stderr", stream: "stderr", args: []string{"sh", "-c", `exec cat /dev/zero >&2`}},
		// The shell is killed; the pipeline it started gets EPIPE.
		{name: "pipeline", stream: "stdout", args: []string{"sh", "-c", `cat /dev/zero | cat`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := l.Run(context.Background(), Command{Args: tc.args})
			assertTooLarge(t, res, err, tc.stream, limit, tc.args[0])
		})
	}
	t.Run("exactly the cap", func(t *testing.T) {
		res, err := l.Run(context.Background(), Command{Args: []string{"head", "-c", strconv.Itoa(limit), "/dev/zero"}})
		if err != nil || len(res.Stdout) != limit {
			t.Fatalf("%d bytes, %v", len(res.Stdout), err)
		}
		_, err = l.Run(context.Background(), Command{Args: []string{"head", "-c", strconv.Itoa(limit + 1), "/dev/zero"}})
		if !errors.Is(err, ErrOutputTooLarge) {
			t.Fatalf("one byte over: %v", err)
		}
	})
}

// TestIntegrationSSHDOutputCap streams endless output from a real sshd,
// as root (the kill goes through a second session) and as a sudo user
// (the SSH signal reaches the command): the Run fails with the cap, the
// remote command is gone, the connection still works.
func TestIntegrationSSHDOutputCap(t *testing.T) {
	srv := testhost.SSHD(t)
	testhost.EnsureUser(t, "pgtune-sudo", true)
	const limit = 256 << 10
	lowerOutputCap(t, limit)
	ctx := context.Background()
	for _, login := range []string{"root", "pgtune-sudo"} {
		for _, stream := range []string{"stdout", "stderr"} {
			t.Run(login+"/"+stream, func(t *testing.T) {
				cfg := sshdConfig(srv)
				cfg.User = login
				c := dial(t, cfg)
				// A file name nobody else uses marks the process.
				marker := fmt.Sprintf("/nonexistent/pgtune-zeros-%d-%d", os.Getpid(), time.Now().UnixNano())
				script := `exec "$@"`
				if stream == "stderr" {
					script = `exec "$@" >&2`
				}
				res, err := c.Run(ctx, Command{Args: []string{"sh", "-c", script, "sh", "cat", "/dev/zero", marker}, Become: true})
				assertTooLarge(t, res, err, stream, limit, "cat")
				waitGone(t, marker)
				if res, err := c.Run(ctx, Command{Args: []string{"echo", "ok"}}); err != nil || string(res.Stdout) != "ok\n" {
					t.Errorf("after the cap: %q %v", res.Stdout, err)
				}
			})
		}
	}
}

// waitGone waits until no process has marker on its command line. The
// commands it waits for never end by themselves, so the kill is what ends
// them; the wait is bounded by the hang guard, not by the kill's grace
// period, which a loaded machine may overrun.
func waitGone(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		out, _ := exec.Command("pgrep", "-f", marker).Output()
		if len(bytes.TrimSpace(out)) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("remote command still running after the cap: pids %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
