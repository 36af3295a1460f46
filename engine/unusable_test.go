package engine

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/transport"
)

// usesVar is a module whose check evaluates one expression of the playbook.
type usesVar struct{ value expr.Value }

func (usesVar) Name() string       { return "usesvar" }
func (usesVar) Requires() []string { return nil }
func (usesVar) NewParams() any     { return &struct{}{} }
func (usesVar) Validate(any) error { return nil }
func (m usesVar) Check(_ context.Context, t *Target, _ any) (*plan.ModulePlan, error) {
	if _, err := t.Scope.Eval(m.value); err != nil {
		return nil, err
	}
	return &plan.ModulePlan{Module: m.Name()}, nil
}
func (usesVar) Apply(context.Context, *Target, *plan.ModulePlan) error  { return nil }
func (usesVar) Verify(context.Context, *Target, *plan.ModulePlan) error { return nil }

// A Jinja value fails its host where it is used, with both places: the
// expression's and the value's. A connection var fails the host before
// any connection is tried; hosts that use nothing unusable run.
func TestUnusableVarsFailWhereUsed(t *testing.T) {
	gather, err := os.ReadFile("facts/testdata/gather-debian-vm.txt")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Parse("inv.yml", []byte(`all:
  hosts:
    db1:
      cluster_name: "{{ inventory_hostname }}-pg"
    db2:
      ansible_host: "{{ inventory_hostname }}.db"
      cluster_name: main
    db3:
      cluster_name: main
      unused: !vault |
        $ANSIBLE_VAULT;1.1;AES256
        6231
`))
	if err != nil {
		t.Fatal(err)
	}
	value, err := expr.Parse("${vars.cluster_name}", "p.yml", 5, 14)
	if err != nil {
		t.Fatal(err)
	}
	mods, _ := Registry(usesVar{value: value})
	book := &playbook.Playbook{File: "p.yml", Plays: []*playbook.Play{{
		Name: "p", Hosts: "ungrouped", Sections: []string{"usesvar"}, Policy: map[string]any{"usesvar": &struct{}{}},
	}}}
	var mu sync.Mutex
	dialled := map[string]bool{}
	r := &Runner{Modules: mods, Forks: 3, RunID: "test", PlanOnly: true,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Dial: func(_ context.Context, h *inventory.Host) (transport.Transport, error) {
			mu.Lock()
			dialled[h.Name] = true
			mu.Unlock()
			return cannedHost(gather), nil
		},
	}
	hosts, err := Targets(inv, book, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Plan(context.Background(), inv, book, hosts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := map[string]struct {
		status report.Status
		err    string
	}{
		"db1": {report.Failed, `db1: usesvar: p.yml:5:21: vars.cluster_name cannot be used: inv.yml:4: cluster_name: "{{ inventory_hostname }}-pg" is a Jinja template, which pgtune does not evaluate (pgtune expressions are ${ }); write the value itself`},
		"db2": {report.Failed, `db2: connect: host "db2": inv.yml:6: ansible_host: "{{ inventory_hostname }}.db" is a Jinja template`},
		"db3": {report.InPolicy, ""},
	}
	for _, h := range s.Report("check").Hosts {
		got := ""
		if h.Error != nil {
			got = *h.Error
		}
		w := want[h.Name]
		if h.Status != w.status || !strings.HasPrefix(got, w.err) || (w.err == "") != (got == "") {
			t.Errorf("%s: %s %q\nwant %s %q", h.Name, h.Status, got, w.status, w.err)
		}
	}
	if dialled["db2"] || !dialled["db1"] || !dialled["db3"] {
		t.Errorf("dialled %v: db2 must fail before any connection", dialled)
	}
}

// validate names a connection var pgtune cannot use, without any host.
func TestValidateRefusesUnusableConnectionVars(t *testing.T) {
	inv, err := inventory.Parse("inv.yml", []byte("all:\n  hosts:\n    db1:\n      ansible_password: !vault |\n        $ANSIBLE_VAULT;1.1;AES256\n        6231\n"))
	if err != nil {
		t.Fatal(err)
	}
	mods, _ := Registry(usesVar{})
	book := &playbook.Playbook{File: "p.yml", Plays: []*playbook.Play{{
		Name: "p", Hosts: "all", Sections: []string{"usesvar"}, Policy: map[string]any{"usesvar": &struct{}{}},
	}}}
	r := &Runner{Modules: mods}
	err = r.Validate(inv, book, inv.Hosts)
	if err == nil || !strings.Contains(err.Error(), `host "db1": inv.yml:4: ansible_password is encrypted with Ansible Vault`) {
		t.Fatalf("err = %v", err)
	}
}
