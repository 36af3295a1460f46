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
		}
	}
}
