package main

import (
	"os"
	"path/filepath"
)

// In-process applies keep their run state (fleet.go) in a directory of
// their own, never in the home directory of whoever runs the tests.
func init() {
	if os.Getenv("XDG_STATE_HOME") == "" {
		_ = os.Setenv("XDG_STATE_HOME", filepath.Join(os.TempDir(), "pgtune-test-state"))
	}
}
