package engine_test

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/internal/badinput"
	"github.com/pgtune/pgtune/modules/hugepages"
	"github.com/pgtune/pgtune/modules/oom"
	"github.com/pgtune/pgtune/modules/overcommit"
	"github.com/pgtune/pgtune/modules/pgconf"
	"github.com/pgtune/pgtune/playbooks"
)

var update = flag.Bool("update", false, "write testdata/policy/bad/*.err from the current messages")

func registry() (map[string]engine.Module, playbook.Registry) {
	return engine.Registry(hugepages.New(), pgconf.New(), overcommit.New(), oom.New())
}

// TestValidatePolicyBad: every testdata/policy/bad/NAME.yml loads, and
// ValidatePolicy refuses it, without a host, with exactly NAME.err.
func TestValidatePolicyBad(t *testing.T) {
	mods, reg := registry()
	badinput.Check(t, "testdata/policy/bad", *update, func(file string, data []byte) error {
		book, err := playbook.Parse(file, data, reg)
		if err != nil {
			t.Fatalf("%s does not even load: %v", file, err)
		}
		return engine.ValidatePolicy(book, mods)
	})
}

// TestValidatePolicyGood: the built-in policy and the repository's
// playbooks pass.
func TestValidatePolicyGood(t *testing.T) {
	mods, reg := registry()
	book, err := playbook.Parse(playbooks.DefaultName, playbooks.Default, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.ValidatePolicy(book, mods); err != nil {
		t.Errorf("%s: %v", playbooks.DefaultName, err)
	}
	files, err := filepath.Glob("../playbooks/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no playbooks: %v", err)
	}
	for _, f := range files {
		book, err := playbook.Load(f, reg)
		if err != nil {
			t.Fatal(err)
		}
		if err := engine.ValidatePolicy(book, mods); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
