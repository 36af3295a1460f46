// Package transport is how commands and files reach a host: over SSH or on
// this machine. Everything above it (facts, modules) speaks only Transport, so
// the same code path runs against a laptop, a CI box or a fleet.
package transport

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Command is one program invocation. Args are passed as a vector: the local
// transport never involves a shell, and the SSH transport quotes every
// argument, so no inventory value can inject shell syntax.
type Command struct {
	Args []string
	// Stdin, when non-nil, is fed to the program.
	Stdin []byte
	// Become runs the command privileged (sudo -n) when the login user is
	// not root. It is a no-op for root.
	Become bool
	// Op names what a script-backed command does (OpReadFile, ...), so a
	// fake host can answer the operation instead of matching script
	// text. Real transports ignore it.
	Op Op
}

// Op names a host operation that pgtune runs as a script.
type Op string

// The file operations of this package.
const (
	OpReadFile   Op = "read-file"   // Args[4..5]: path, the user who reads (ReadFileAs: always; ReadFileActing: where root does not act)
	OpWriteFile  Op = "write-file"  // Args[4..9]: path, mode, owner, backup, size, as; Args[12]: owned by; Stdin: content
	OpRemoveFile Op = "remove-file" // Args[4..6]: path, backup, as
	OpMakeDir    Op = "make-dir"    // Args[4..5]: path, owner
)

// String renders the command as it would be typed, for logs and errors.
// Multi-line arguments (inline scripts: sh -c SCRIPT) are cut to their
// first line: errors name the step, and whole scripts in every message
// bury the reason.
func (c Command) String() string {
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		if first, _, cut := strings.Cut(a, "\n"); cut {
			a = first + " …"
		}
		args[i] = a
	}
	return Join(args)
}

// Result is what a finished command left behind.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// ExitError reports a command that ran but exited non-zero.
type ExitError struct {
	Command string
	Result
}

func (e *ExitError) Error() string {
	msg := clipBothEnds(strings.TrimSpace(string(e.Stderr)))
	if msg == "" {
		msg = clipBothEnds(strings.TrimSpace(string(e.Stdout)))
	}
	if msg == "" {
		return fmt.Sprintf("%s: exit status %d", e.Command, e.ExitCode)
	}
	return fmt.Sprintf("%s: exit status %d: %s", e.Command, e.ExitCode, msg)
}

// MaxErrorOutput bounds the host output an error quotes: errors reach the
// report, the run state and the terminal, and a host's output may be as
// large as the output cap.
const MaxErrorOutput = 2000

// ClipOutput is host output as an error quotes it: trimmed, and cut to
// MaxErrorOutput bytes (Clip).
func ClipOutput(s string) string { return Clip(strings.TrimSpace(s)) }

// ClipOutputTail is ClipOutput keeping the end: for output whose last
// lines say what went wrong (pg_ctl's "server does not shut down" comes
// after its dots).
func ClipOutputTail(s string) string { return ClipTail(strings.TrimSpace(s)) }

// Clip cuts host text an error quotes as it is (%q) to MaxErrorOutput
// bytes, on a character boundary ("…" marks the cut).
func Clip(s string) string {
	if len(s) <= MaxErrorOutput {
		return s
	}
	return s[:cutBefore(s, MaxErrorOutput)] + "…"
}

// ClipTail is Clip keeping the last MaxErrorOutput bytes instead, from a
// character boundary ("…" marks the cut).
func ClipTail(s string) string {
	if len(s) <= MaxErrorOutput {
		return s
	}
	return "…" + s[cutAfter(s, len(s)-MaxErrorOutput):]
}

// clipBothEnds keeps about half of MaxErrorOutput from each end of s: a
// failed command's error often says what it tried first and why it gave
// up last.
func clipBothEnds(s string) string {
	if len(s) <= MaxErrorOutput {
		return s
	}
	half := MaxErrorOutput / 2
	return s[:cutBefore(s, half)] + " … " + s[cutAfter(s, len(s)-half):]
}

// cutBefore is where to cut s to at most i bytes: i moved back to a
// character start, by at most utf8.UTFMax-1 bytes. Text that is not UTF-8
// (no character start there) is cut at i: walking further back would
// drop all of it.
func cutBefore(s string, i int) int {
	for j := i; j > i-utf8.UTFMax && j > 0; j-- {
		if utf8.RuneStart(s[j]) {
			return j
		}
	}
	return i
}

// cutAfter is where the kept end of s starts, at least at i: i moved on
// to a character start, by at most utf8.UTFMax-1 bytes (cut at i when
// there is none).
func cutAfter(s string, i int) int {
	for j := i; j < i+utf8.UTFMax && j < len(s); j++ {
		if utf8.RuneStart(s[j]) {
			return j
		}
	}
	return i
}

// Transport runs commands on one host. Implementations must be safe for
// concurrent use: the SSH transport multiplexes sessions over one connection.
type Transport interface {
	// Run executes cmd and waits for it. A command that ran and exited
	// non-zero returns its Result and an *ExitError; any other error means
	// the command could not be run (connection lost, context cancelled).
	Run(ctx context.Context, cmd Command) (Result, error)
	// Close releases the connection. It is safe to call more than once.
	Close() error
}
