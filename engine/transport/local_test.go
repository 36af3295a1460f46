package transport

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestLocalRun(t *testing.T) {
	l := NewLocal()
	defer l.Close()
	tests := []struct {
		name     string
		cmd      Command
		wantOut  string
		wantCode int
		wantErr  string
	}{
		{name: "stdout", cmd: Command{Args: []string{"echo", "hi"}}, wantOut: "hi\n"},
		{name: "no shell involved", cmd: Command{Args: []string{"echo", "$(id)", "; true"}}, wantOut: "$(id) ; true\n"},
		{name: "stdin", cmd: Command{Args: []string{"cat"}, Stdin: []byte("in\x00put")}, wantOut: "in\x00put"},
		{name: "nil stdin", cmd: Command{Args: []string{"cat"}}, wantOut: ""},
		{name: "exit code", cmd: Command{Args: []string{"sh", "-c", "echo bad >&2; exit 4"}}, wantCode: 4, wantErr: "exit status 4: bad"},
		{name: "missing program", cmd: Command{Args: []string{"/nonexistent/prog"}}, wantErr: "no such file"},
		{name: "empty", cmd: Command{}, wantErr: "empty command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := l.Run(context.Background(), tc.cmd)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if string(res.Stdout) != tc.wantOut || res.ExitCode != tc.wantCode {
				t.Errorf("got %q code %d, want %q code %d", res.Stdout, res.ExitCode, tc.wantOut, tc.wantCode)
			}
			if tc.wantCode != 0 {
				var xe *ExitError
				if !errors.As(err, &xe) || xe.ExitCode != tc.wantCode {
					t.Errorf("err %v is not an *ExitError with code %d", err, tc.wantCode)
				}
			}
		})
	}
}

// The command never ends by itself: Run returning at all is the cancel
// working.
func TestLocalCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var err error
	returns(t, "Run after its deadline", func() {
		_, err = NewLocal().Run(ctx, Command{Args: []string{"sleep", "infinity"}})
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestLocalBecomeAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("as non-root, become goes through sudo")
	}
	// Root needs no sudo: this works even where sudo is not installed.
	res, err := NewLocal().Run(context.Background(), Command{Args: []string{"id", "-u"}, Become: true})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Fatalf("id -u = %q, %v", res.Stdout, err)
	}
}
