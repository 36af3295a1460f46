package pgconf

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
)

// cannedTransport answers every command with res (and no error).
type cannedTransport struct {
	transport.Transport
	res transport.Result
}

func (c cannedTransport) Run(context.Context, transport.Command) (transport.Result, error) {
	return c.res, nil
}

// TestHostOutputClipped: host output quoted in an error is clipped as
// ExitError clips it: errors reach the report, the run state and the
// terminal, and a host may print up to the output cap (16 MiB).
func TestHostOutputClipped(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	lines := long + "\n" + long + "\n" + long + "\n"
	ctx := context.Background()
	on := func(stdout, stderr string) *engine.Target {
		return &engine.Target{Name: "db1", Transport: cannedTransport{res: transport.Result{Stdout: []byte(stdout), Stderr: []byte(stderr)}},
			Facts: &facts.Facts{HugePageSize: 2 << 20}}
	}
	api := patroniAPI{URL: "http://127.0.0.1:8008", Owner: "postgres", Member: "m1"}
	tests := []struct {
		name string
		err  func() error
	}{
		{"the Patroni helper's stderr", func() error {
			_, _, err := api.call(ctx, on("", lines), "GET", "/patroni", nil, time.Second)
			return err
		}},
		{"the Patroni helper's failure", func() error {
			_, _, err := api.call(ctx, on("status=0\n"+lines, ""), "GET", "/patroni", nil, time.Second)
			return err
		}},
		// switchover.go's stop errors quote them.
		{"pg_ctl's last lines", func() error { return fmt.Errorf("stop it: %s", lastLines(lines, 3)) }},
		{"the running server's settings", func() error {
			_, err := liveSettings(ctx, on(lines, ""), &facts.Postgres{Owner: "postgres", Port: 5432})
			return err
		}},
		{"the huge page pool", func() error {
			_, err := freeHugePages(ctx, on(lines, ""), &State{})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			if err == nil {
				t.Fatal("no error")
			}
			// The message around the output is short; %q may escape.
			if msg := err.Error(); len(msg) > transport.MaxErrorOutput+300 || !strings.Contains(msg, "…") {
				t.Errorf("error of %d bytes, want the output clipped to %d: %.200s…", len(msg), transport.MaxErrorOutput, msg)
			}
		})
	}
}

// TestLastLinesKeepsTheEnd: pg_ctl's verdict comes after a line of dots
// that may be longer than an error may quote: it is the part kept.
func TestLastLinesKeepsTheEnd(t *testing.T) {
	tests := []struct{ name, out, want string }{
		{"short", "waiting for server to shut down.... failed\npg_ctl: server does not shut down\n", "waiting for server to shut down.... failed / pg_ctl: server does not shut down"},
		{"after a long line of dots", "waiting for server to shut down" + strings.Repeat(".", 3*transport.MaxErrorOutput) + " failed\npg_ctl: server does not shut down\n",
			"…" + strings.Repeat(".", transport.MaxErrorOutput-len(" failed / pg_ctl: server does not shut down")) + " failed / pg_ctl: server does not shut down"},
		{"only the last three lines", "one\ntwo\nthree\nfour\n", "two / three / four"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lastLines(tt.out, 3); got != tt.want {
				t.Errorf("lastLines = %d bytes …%q, want %d bytes …%q", len(got), got[max(0, len(got)-60):], len(tt.want), tt.want[max(0, len(tt.want)-60):])
			}
		})
	}
}
