package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestMemProfile: with PGTUNE_MEMPROFILE set, a run leaves a heap profile
// (gzip, pprof's format) there; unset, nothing is written.
func TestMemProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.pprof")
	t.Setenv(MemProfileEnv, "")
	startMemProfile()()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("profile written without %s: %v", MemProfileEnv, err)
	}
	t.Setenv(MemProfileEnv, path)
	stop := startMemProfile()
	stop()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		t.Errorf("%s: not a gzip-compressed pprof profile (%d bytes)", path, len(data))
	}
}
