package main

import (
	"os"
)

// In-process applies keep their run state (fleet.go) in a directory of
// their own, never in the home directory of whoever runs the tests, and
// never in one shared with another run or user (a fixed path left by a
// root run is not writable by the unprivileged unit run).
func init() {
	if os.Getenv("XDG_STATE_HOME") == "" {
		if dir, err := os.MkdirTemp("", "pgtune-test-state-"); err == nil {
			_ = os.Setenv("XDG_STATE_HOME", dir)
			ownStateDir = dir
		}
	}
}

// ownStateDir is the state directory this process made ("" when it
// inherited one, as the scripts' pgtune processes do): removed when the
// tests end (removeOwnState), not left in /tmp by every run.
var ownStateDir string

// removeOwnState runs the tests and then removes ownStateDir.
type removeOwnState struct{ m interface{ Run() int } }

func (r removeOwnState) Run() int {
	code := r.m.Run()
	if ownStateDir != "" {
		_ = os.RemoveAll(ownStateDir)
	}
	return code
}
