package playbook

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/expr"
)

var update = flag.Bool("update", false, "write testdata/bad/*.err from the current messages")

// TestBadInputs loads every testdata/bad/NAME.yml with the test registry
// and compares the error with NAME.err exactly (one problem per line).
func TestBadInputs(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad inputs: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(filepath.Base(f), data, testRegistry())
			if err == nil {
				t.Fatal("loaded without error")
			}
			var pe *expr.PosError
			if !errors.As(err, &pe) || pe.File != filepath.Base(f) {
				t.Errorf("error does not name the file: %#v", err)
			}
			errFile := strings.TrimSuffix(f, ".yml") + ".err"
			if *update {
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
