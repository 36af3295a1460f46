package engine_test

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/internal/badinput"
	"github.com/pgtune/pgtune/modules/registry"
	"github.com/pgtune/pgtune/playbooks"
)

var update = flag.Bool("update", false, "write testdata/policy/bad/*.err from the current messages")

func allModules() (map[string]engine.Module, playbook.Registry) {
	return engine.Registry(registry.All()...)
}

// TestValidatePolicyBad: every testdata/policy/bad/NAME.yml loads, and
// ValidatePolicy refuses it, without a host, with exactly NAME.err.
func TestValidatePolicyBad(t *testing.T) {
	mods, reg := allModules()
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
	mods, reg := allModules()
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

// TestValidatePolicyExprs: expressions are evaluated against unknown
// facts, vars and module outputs of their types with the real functions,
// so what fails on every host fails validate, at file:line:col; with an
// inventory, a var no selected host defines too. Values that need a host
// stay unknown: the valid cases pass.
func TestValidatePolicyExprs(t *testing.T) {
	const inv = `all:
  children:
    postgres:
      hosts:
        db1: {pool_bytes: 1073741824}
        db2:
    web:
      hosts:
        web1:
`
	cases := []struct {
		name, book string
		withInv    bool
		want       string // "" when valid
	}{
		{"unknown function", `- hosts: all
  policy:
    hugepages:
      pool: "${round(facts.mem_total * 0.25)}"
`, false, `hugepages: p.yml:4:16: Call to unknown function: There is no function named "round".`},
		{"unknown output", `- hosts: all
  policy:
    hugepages: {}
    overcommit:
      headroom: "${hugepages.poool}"
`, false, `overcommit: p.yml:5:29: Unsupported attribute: This object does not have an attribute named "poool".`},
		{"module not in the play", `- hosts: all
  policy:
    overcommit:
      headroom: "${hugepages.pool}"
`, false, `overcommit: p.yml:4:20: Unknown variable: There is no variable named "hugepages".`},
		{"module in a play on other hosts", `- hosts: postgres
  policy:
    hugepages: {}
- hosts: web
  policy:
    overcommit:
      headroom: "${hugepages.pool}"
`, true, `overcommit: p.yml:7:20: Unknown variable: There is no variable named "hugepages".`},
		{"var no host defines", `- hosts: all
  policy:
    hugepages:
      pool: "${vars.pool_size}"
`, true, `hugepages: p.yml:4:21: vars.pool_size: none of the inventory's 3 hosts defines it`},
		{"var indexed no host defines", `- hosts: all
  policy:
    hugepages:
      pool: "${vars[\"pool_size\"]}"
`, true, `hugepages: p.yml:4:20: vars.pool_size: none of the inventory's 3 hosts defines it`},
		{"type error", `- hosts: all
  policy:
    hugepages:
      pool: "${floor(facts.kernel)}"
`, false, `hugepages: p.yml:4:22: Invalid function argument: Invalid value for "num" parameter: a number is required.`},
		{"string and number", `- hosts: all
  policy:
    hugepages:
      pool: "${facts.mem_total + \"x\"}"
`, false, `hugepages: p.yml:4:34: Invalid operand: Unsuitable value for right operand: a number is required.`},

		{"var one host defines", `- hosts: all
  policy:
    hugepages:
      pool: "${vars.pool_bytes}"
`, true, ""},
		{"vars without an inventory", `- hosts: all
  policy:
    hugepages:
      pool: "${vars.pool_size}"
`, false, ""},
		{"module in a play sharing a host", `- hosts: postgres
  policy:
    hugepages: {}
- hosts: db1
  policy:
    overcommit:
      headroom: "${floor(max(facts.mem_total - hugepages.pool, 0) / 16)}"
`, true, ""},
		{"every kind of name", `- hosts: all
  policy:
    hugepages:
      pool: "${floor(facts.mem_total * (host.name == \"db1\" ? 0.25 : 0.2))}"
    pgconf:
      pool: "${hugepages.pool}"
    overcommit:
      kbytes: "${floor((facts.mem_total - hugepages.pool - pgconf.segment) * 0.8 / KiB) + facts.sysctl[\"vm.overcommit_kbytes\"] * 0}"
`, false, ""},
	}
	mods, reg := allModules()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			book, err := playbook.Parse("p.yml", []byte(c.book), reg)
			if err != nil {
				t.Fatal(err)
			}
			var hosts *engine.PolicyHosts
			if c.withInv {
				iv, err := inventory.Parse("inv.yml", []byte(inv))
				if err != nil {
					t.Fatal(err)
				}
				all, err := engine.Targets(iv, book, "")
				if err != nil {
					t.Fatal(err)
				}
				if hosts, err = engine.InventoryHosts(iv, book, all); err != nil {
					t.Fatal(err)
				}
			}
			err = engine.ValidatePolicyOn(book, mods, hosts)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused a valid playbook: %v", err)
			case c.want != "" && err == nil:
				t.Errorf("passed, want %s", c.want)
			case c.want != "" && err.Error() != c.want:
				t.Errorf("got  %v\nwant %s", err, c.want)
			}
		})
	}
}
