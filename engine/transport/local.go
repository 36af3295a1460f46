package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
)

// Local runs commands on this machine, without a shell and without SSH.
type Local struct {
	// become is the sudo password for privileged steps when pgtune does
	// not run as root; empty: `sudo -n`, which never asks.
	become becomeSecret
}

// NewLocal returns the transport for `connection: local`.
func NewLocal() *Local { return &Local{} }

// NewLocalBecome is NewLocal whose privileged steps run through
// `sudo -S`, answered with password exactly as over SSH (becomeFeed): only
// when sudo's prompt shows, never on a command line, and a second prompt
// (a wrong password) ends the command at once.
func NewLocalBecome(password string) *Local { return &Local{become: becomeSecret(password)} }

func (l *Local) Run(ctx context.Context, cmd Command) (Result, error) {
	if len(cmd.Args) == 0 {
		return Result{}, errors.New("empty command")
	}
	args := cmd.Args
	become := cmd.Become && os.Geteuid() != 0
	var feed *becomeFeed
	switch {
	case become && l.become != "":
		feed = newBecomeFeed(l.become)
		args = feed.argv(cmd.Args)
	case become:
		args = append([]string{"sudo", "-n", "--"}, args...)
	}
	// Going over the output cap kills the process (runCtx) and stops
	// reading its pipes, so whatever it started gets EPIPE.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	lim := newOutputLimit(MaxOutput())
	lim.onOver = stop
	c := exec.CommandContext(runCtx, args[0], args[1:]...)
	var stdout, plainStderr bytes.Buffer
	stderr := newPIDCapture()
	c.Stdout = lim.writer("stdout", &stdout)
	if feed != nil {
		c.Stderr = lim.writer("stderr", stderr)
		pipe, err := c.StdinPipe()
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w", cmd, err)
		}
		feed.attachPipe(pipe, stderr)
	} else {
		c.Stderr = lim.writer("stderr", &plainStderr)
		if cmd.Stdin != nil {
			c.Stdin = bytes.NewReader(cmd.Stdin)
		}
	}
	err := l.start(c, feed, cmd.Stdin)
	res := Result{Stdout: stdout.Bytes(), Stderr: plainStderr.Bytes()}
	if feed != nil {
		res.Stderr = stderr.Bytes()
	}
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
		xe := &ExitError{Command: cmd.String(), Result: res}
		if !become {
			return res, xe
		}
		name := localUser()
		if feed != nil && feed.refused(res.ExitCode) {
			return res, &BecomeError{User: name, Reason: "sudo: the become password was refused for user " + name +
				" (check ansible_become_password or what --ask-become-pass was given)", Exit: xe}
		}
		if berr := becomeError(xe, name); berr != nil {
			return res, berr
		}
		return res, xe
	default:
		return res, fmt.Errorf("%s: %w", cmd, err)
	}
}

// start runs c to its end; with feed, sudo's prompt is answered and the
// command's stdin handed over once sudo let it run.
func (l *Local) start(c *exec.Cmd, feed *becomeFeed, stdin []byte) error {
	if feed == nil {
		return c.Run()
	}
	if err := c.Start(); err != nil {
		feed.stdin.Close()
		return err
	}
	stopFeed := feed.run(stdin)
	defer stopFeed()
	return c.Wait()
}

// localUser names the user pgtune runs as, for sudo's messages.
func localUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return fmt.Sprint(os.Geteuid())
}

func (l *Local) Close() error { return nil }
