package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// Local runs commands on this machine, without a shell and without SSH.
type Local struct{}

// NewLocal returns the transport for `connection: local`.
func NewLocal() *Local { return &Local{} }

func (l *Local) Run(ctx context.Context, cmd Command) (Result, error) {
	if len(cmd.Args) == 0 {
		return Result{}, errors.New("empty command")
	}
	args := cmd.Args
	if cmd.Become && os.Geteuid() != 0 {
		args = append([]string{"sudo", "-n", "--"}, args...)
	}
	// Going over the output cap kills the process (runCtx) and stops
	// reading its pipes, so whatever it started gets EPIPE.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	lim := newOutputLimit(MaxOutput())
	lim.onOver = stop
	c := exec.CommandContext(runCtx, args[0], args[1:]...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = lim.writer("stdout", &stdout), lim.writer("stderr", &stderr)
	if cmd.Stdin != nil {
		c.Stdin = bytes.NewReader(cmd.Stdin)
	}
	err := c.Run()
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var exitErr *exec.ExitError
	switch {
	case lim.exceeded():
		return Result{}, lim.err(cmd)
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return res, fmt.Errorf("%s: %w", cmd, ctx.Err())
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
		return res, &ExitError{Command: cmd.String(), Result: res}
	default:
		return res, fmt.Errorf("%s: %w", cmd, err)
	}
}

func (l *Local) Close() error { return nil }
