package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Sequences a program sends to ask the terminal something: OSC queries
// (background/foreground colour "]11;?"), device status and cursor
// position reports (CSI … n), device attributes (CSI … c). A terminal
// that never answers makes a program that waits for the reply stall.
var terminalQuery = regexp.MustCompile(`\x1b\]|\x1b\[[0-9;?>]*[nc]`)

// The fake host runs no commands: both hosts fail after their facts.
var progressLine = regexp.MustCompile(`\r\x1b\[Kcheck: 2/2 done, (\x1b\[31m)?2 failed(\x1b\[0m)?, 0 left`)

var sgrColour = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// runOnSilentTerminal runs the test binary's pgtune with stdin, stdout and
// stderr on a pseudo-terminal nobody answers, and returns every byte it
// wrote there. The deadline only stops a hung child so the test can fail
// with its output; nothing is asserted about time.
func runOnSilentTerminal(t *testing.T, env []string, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("pgtune") // testscript.Main put it on $PATH
	if err != nil {
		t.Fatal(err)
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds the only other end
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(&out, ptmx) // ends with EIO once the child's end is closed
		close(copied)
	}()
	err = cmd.Wait()
	<-copied
	if ctx.Err() != nil {
		t.Fatalf("pgtune %v never finished on a terminal that does not answer; it wrote:\n%q", args, out.Bytes())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestSilentTerminalIsNeverQueried: on a terminal that never answers
// (script(1), Emacs shells, CI pseudo-terminals) every command finishes
// and sends no query; colour only where allowed.
func TestSilentTerminalIsNeverQueried(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fakehost.facts")
	writeFile(t, fake, profiles[0].transcript())
	inv := filepath.Join(dir, "inv.yml")
	writeFile(t, inv, "all:\n  hosts:\n    db1:\n      connection: local\n    db2:\n      connection: local\n  vars:\n    sysctl_dir: "+dir+"/sysctl.d\n")
	// The fake host has no PostgreSQL: a play must name the hosts, or
	// they are skipped (reached only through all).
	book := namedDefaultPlaybook(t, dir)
	base := []string{TestHostEnv + "=" + fake, "TERM=xterm-256color", "COLORTERM=truecolor"}
	for _, tc := range []struct {
		name      string
		env       []string
		args      []string
		want      string
		colour    bool
		noColours bool
	}{
		{"check, colour", []string{"NO_COLOR="}, []string{"check", "-v", "-i", inv, book}, "RECAP check", true, false},
		{"check, NO_COLOR", []string{"NO_COLOR=1"}, []string{"check", "-v", "-i", inv, book}, "RECAP check", false, true},
		{"check, --no-color", []string{"NO_COLOR="}, []string{"check", "--no-color", "-i", inv, book}, "RECAP check", false, true},
		{"facts", []string{"NO_COLOR="}, []string{"facts", "-i", inv}, "huge pages:", false, false},
		{"apply", []string{"NO_COLOR="}, []string{"apply", "--yes", "-i", inv, book}, "RECAP apply", false, false},
		{"version", nil, []string{"version"}, "pgtune ", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := runOnSilentTerminal(t, append(append([]string{}, base...), tc.env...), tc.args...)
			if q := terminalQuery.Find(out); q != nil {
				t.Errorf("pgtune %v sent the terminal query %q:\n%q", tc.args, q, out)
			}
			if !bytes.Contains(out, []byte(tc.want)) {
				t.Errorf("pgtune %v did not print %q:\n%q", tc.args, tc.want, out)
			}
			if tc.args[0] == "check" && !progressLine.Match(out) {
				t.Errorf("pgtune %v: no progress line on the terminal:\n%q", tc.args, out)
			}
			if tc.colour && !sgrColour.Match(out) {
				t.Errorf("pgtune %v: no colour on a terminal:\n%q", tc.args, out)
			}
			if tc.noColours && sgrColour.Match(out) {
				t.Errorf("pgtune %v: colour despite NO_COLOR/--no-color:\n%q", tc.args, out)
			}
		})
	}
}

// TestSecondInterruptGivesTheEchoBack: a second Ctrl-C that ends check
// while it reads a password without echo (-k) gives the terminal its
// echo back before pgtune dies of the signal: the shell after it shows
// what is typed. The first Ctrl-C cannot end the prompt (it cancels the
// run's context, which term.ReadPassword does not watch).
func TestSecondInterruptGivesTheEchoBack(t *testing.T) {
	bin, err := exec.LookPath("pgtune") // testscript.Main put it on $PATH
	if err != nil {
		t.Fatal(err)
	}
	inv := filepath.Join(t.TempDir(), "inventory.yml")
	if err := os.WriteFile(inv, []byte("all:\n  hosts:\n    h1:\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	cmd := exec.Command(bin, "check", "-i", inv, "-k")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	guard := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() }) // a hang guard, not a wait
	defer guard.Stop()
	echo := func() bool {
		tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		return tio.Lflag&unix.ECHO != 0
	}
	// The prompt is written before the echo goes off: wait for it, then
	// for the echo to go (checked, not slept on).
	var out bytes.Buffer
	buf := make([]byte, 256)
	for !bytes.Contains(out.Bytes(), []byte("SSH password: ")) {
		n, err := ptmx.Read(buf)
		if err != nil {
			t.Fatalf("no prompt: %v\n%q", err, out.Bytes())
		}
		out.Write(buf[:n])
	}
	for echo() {
		time.Sleep(10 * time.Millisecond) // polling the terminal's state, bounded by the guard
	}
	go func() { _, _ = io.Copy(io.Discard, ptmx) }()
	// Ctrl-C until it ends: two signals sent at once may reach it as one
	// (a pending signal is not queued twice), and nothing shows when the
	// first was taken.
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	for err = nil; ; {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case err = <-waited:
		case <-time.After(100 * time.Millisecond): // the next Ctrl-C, not a deadline
			continue
		}
		break
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("pgtune: %v, want killed by SIGINT", err)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Fatalf("pgtune: %v, want killed by SIGINT", err)
	}
	if !echo() {
		t.Error("the terminal was left without echo")
	}
}
