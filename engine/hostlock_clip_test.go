package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
)

// cannedRun answers every command with res and err.
type cannedRun struct {
	transport.Transport
	res transport.Result
	err error
}

func (c cannedRun) Run(context.Context, transport.Command) (transport.Result, error) {
	return c.res, c.err
}

// TestStateDirAnswerClipped: what the host answers to the state directory
// check is quoted clipped (a host may print up to the output cap).
func TestStateDirAnswerClipped(t *testing.T) {
	long := transport.Result{Stdout: []byte(strings.Repeat("x", 100_000)), ExitCode: 3}
	for _, tt := range []struct {
		name string
		t    cannedRun
	}{
		{"a refusal", cannedRun{res: long, err: &transport.ExitError{Command: "sh", Result: long}}},
		{"an unexpected answer", cannedRun{res: transport.Result{Stdout: long.Stdout}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := checkStateDir(context.Background(), tt.t, "/var/lib/pgtune/runs", false, false)
			if err == nil || len(err.Error()) > transport.MaxErrorOutput+200 {
				t.Errorf("error of %d bytes, want the answer clipped", len(err.Error()))
			}
		})
	}
}
