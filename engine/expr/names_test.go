package expr

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestStatic(t *testing.T) {
	tests := []struct {
		src  string
		want bool
	}{
		{"0.8", true},
		{"high", true},
		{"${2 * GiB}", true},
		{"${-2 * GiB + 512 * MiB}", true},
		{"${floor(GiB / 3)}", true},
		{"${facts.mem_total * 0.25}", false},
		{"${vars.x}", false},
		{"${hugepages.pool}", false},
		{"/etc/sysctl.d/${host.name}.conf", false},
	}
	for _, tt := range tests {
		v, err := Parse(tt.src, "f.yml", 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.Static(); got != tt.want {
			t.Errorf("%q: Static() = %v, want %v", tt.src, got, tt.want)
		}
	}
	if (Value{}).Static() {
		t.Error("an unset value is static")
	}
}

func TestCheckNames(t *testing.T) {
	s := NewSchema()
	s.Add("facts", "mem_total", "sysctl", "postgres")
	s.Add("host", "name")
	s.Add("vars")
	s.Add("hugepages")
	tests := []struct {
		name, doc, err string
	}{
		{name: "known names", doc: `v: "${floor(facts.mem_total * 0.25) + hugepages.pool + vars.anything.deeper}"`},
		{name: "index and nested attributes", doc: `v: "${facts.sysctl[\"vm.nr_hugepages\"] + facts.postgres.anything}"`},
		{name: "units", doc: `v: "${2 * GiB}"`},
		{name: "plain value", doc: `v: facts.mem_totl`},
		{name: "unknown fact", doc: `v: "${facts.mem_totl}"`,
			err: "f.yml:1:13: unknown name facts.mem_totl (facts has: mem_total, postgres, sysctl)"},
		{name: "unknown root", doc: `v: "${1 + fact.mem_total}"`,
			err: `f.yml:1:11: unknown name "fact" (known: GiB, KiB, MiB, TiB, facts, host, hugepages, vars)`},
		{name: "in a template", doc: `v: "/etc/${host.nmae}.conf"`,
			err: "f.yml:1:17: unknown name host.nmae (host has: name)"},
		{name: "block scalar", doc: "v: >-\n  ${floor(\n    facts.mem_totl)}\n",
			err: "f.yml:3:11: unknown name facts.mem_totl (facts has: mem_total, postgres, sysctl)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc struct {
				V Value `yaml:"v"`
			}
			if err := yaml.Unmarshal([]byte(tt.doc), &doc); err != nil {
				t.Fatal(err)
			}
			BindAll(&doc, "f.yml", []byte(tt.doc))
			err := CheckAllNames(&doc, s)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.err {
				t.Errorf("got  %q\nwant %q", got, tt.err)
			}
		})
	}
}

func TestJSONNames(t *testing.T) {
	type inner struct {
		A      int `json:"a"`
		B      int `json:"b,omitempty"`
		Hidden int `json:"-"`
		Plain  int
		low    int
	}
	got := strings.Join(JSONNames(&inner{low: 1}), ",")
	if got != "a,b,Plain" {
		t.Errorf("JSONNames = %s", got)
	}
}
