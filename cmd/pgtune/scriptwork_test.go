package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// onlyT runs the subtests named keep and no others, as `go test -run
// TestAcceptance/NAME` does.
type onlyT struct {
	*testing.T
	keep string
}

func (o onlyT) Run(name string, f func(testscript.T)) {
	if name != o.keep {
		return
	}
	o.T.Run(name, func(t *testing.T) { f(onlyT{t, o.keep}) })
}

func (o onlyT) Verbose() bool { return testing.Verbose() }

// TestScriptsLeaveNoWorkRoot: a run of some of the scripts only leaves
// no directory of testscript's in the temporary directory (it used to
// leave one go-test-script* per run).
func TestScriptsLeaveNoWorkRoot(t *testing.T) {
	gotmp := t.TempDir()
	t.Setenv("GOTMPDIR", gotmp) // where testscript makes its own root
	scripts := t.TempDir()
	for _, name := range []string{"one", "two"} {
		if err := os.WriteFile(filepath.Join(scripts, name+".txtar"), []byte("exec true\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("run", func(t *testing.T) {
		testscript.RunT(onlyT{t, "one"}, scriptParams(t, testscript.Params{Dir: scripts}, profiles[0], nil, false))
	})
	entries, err := os.ReadDir(gotmp)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if len(left) > 0 {
		t.Errorf("left behind in the temporary directory: %s", strings.Join(left, ", "))
	}
}
