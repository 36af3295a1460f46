// Package badinput holds the check shared by the loaders' corpora of bad
// inputs: every DIR/NAME.yml must fail to load with exactly the message in
// DIR/NAME.err, and that message must name the file.
package badinput

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/expr"
)

// Check loads every DIR/*.yml with load (given the file's base name and
// content) and compares the error with the .err file beside it; update
// rewrites the .err files from the current messages instead.
func Check(t *testing.T, dir string, update bool, load func(file string, data []byte) error) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad inputs in %s: %v", dir, err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			err = load(filepath.Base(f), data)
			if err == nil {
				t.Fatal("loaded without error")
			}
			var pe *expr.PosError
			if !errors.As(err, &pe) || pe.File != filepath.Base(f) {
				t.Errorf("error does not name the file: %#v", err)
			}
			errFile := strings.TrimSuffix(f, ".yml") + ".err"
			if update {
				if err := os.WriteFile(errFile, []byte(err.Error()+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, rerr := os.ReadFile(errFile)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if got := err.Error(); got != strings.TrimSuffix(string(want), "\n") {
				t.Errorf("error\n got: %s\nwant: %s", got, want)
			}
		})
	}
}
