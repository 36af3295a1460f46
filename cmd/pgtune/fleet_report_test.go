package main

import (
	"encoding/json"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestInterruptedAtQuestionNotReached: Ctrl-C at the first batch's
// question tried no host: the text says so ("5 not reached", not "5
// failed"). The JSON document keeps DESIGN.md's vocabulary, which has no
// such status: failed, each error saying "not reached: …".
func TestInterruptedAtQuestionNotReached(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			m := newMark()
			stdin, hold := io.Pipe() // a terminal nobody answers
			defer hold.Close()
			w := &promptWriter{asked: func() {
				if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
					t.Error(err)
				}
			}}
			run, inv, book := fleetAppWith(t, m, func(a *App) {
				a.Stdin, a.Stderr = stdin, w
				a.IsTerminal = func() bool { return true }
			})
			code, stdout, _ := run("apply", "-i", inv, "--serial", "2", "--format", format, book)
			if code != exitInterrupted || len(m.applied) != 0 {
				t.Fatalf("exit %d, applied %v; want %d, none\n%s\n%s", code, m.applied, exitInterrupted, stdout, w)
			}
			if format == "text" {
				if !strings.HasSuffix(stdout, "5 hosts: 5 not reached\n") || strings.Contains(stdout, "failed") {
					t.Errorf("the recap does not say 5 not reached:\n%s", stdout)
				}
				return
			}
			var r jsonReport
			if err := json.Unmarshal([]byte(stdout), &r); err != nil {
				t.Fatal(err)
			}
			if r.Summary["failed"] != 5 || r.Summary["not_reached"] != 0 {
				t.Errorf("summary %v; want DESIGN.md's keys, the 5 hosts failed", r.Summary)
			}
			for _, h := range r.Hosts {
				if h.Status != "failed" || h.Error == nil || !strings.HasPrefix(*h.Error, "not reached: ") {
					t.Errorf("%s: %s %v; want failed, not reached", h.Name, h.Status, h.Error)
				}
			}
		})
	}
}
