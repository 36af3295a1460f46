package facts

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
)

// testKeys are the kernel keys the facts tests gather, as the memory
// modules declare them.
var testKeys = []string{"vm.nr_hugepages", "vm.overcommit_memory", "vm.overcommit_kbytes", "vm.overcommit_ratio"}

var testSets = []Set{{Name: "memory", Sysctls: testKeys}}

// linesSet declares a fact set whose facts are the lines its script
// printed.
func linesSet(name, script string) Set {
	return Set{Name: name, Script: script, Parse: func(out []byte) (any, error) {
		return map[string]any{"lines": strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")}, nil
	}}
}

// TestGatherSets runs declared snippets through the real gather script:
// each set gets exactly what its snippet printed, and nothing a snippet
// prints passes for a core fact or another set's output.
func TestGatherSets(t *testing.T) {
	sets := []Set{
		linesSet("first", `echo one; echo 'M MemTotal: 1 kB'; echo 'X second'; printf 'no newline'`),
		linesSet("second", `echo two >&2; echo two; exit 3`),
		{Name: "keys_only", Sysctls: []string{"vm.overcommit_memory"}},
	}
	f, err := Gather(context.Background(), transport.NewLocal(), Options{Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"first":  map[string]any{"lines": []string{"one", "M MemTotal: 1 kB", "X second", "no newline"}},
		"second": map[string]any{"lines": []string{"two"}},
	}
	if !reflect.DeepEqual(f.Modules, want) {
		t.Errorf("module facts %#v\nwant %#v", f.Modules, want)
	}
	if f.MemTotal <= 1024 {
		t.Errorf("MemTotal %d: a snippet's output was read as meminfo", f.MemTotal)
	}
	// Where /proc/sys/vm is hidden (a container) the key is absent, not
	// made up.
	_, readable := os.ReadFile("/proc/sys/vm/overcommit_memory")
	if _, ok := f.Sysctl["vm.overcommit_memory"]; ok != (readable == nil) {
		t.Errorf("declared key gathered %v, readable here: %v", ok, readable)
	}
	if len(f.Sysctl) > 1 {
		t.Errorf("gathered keys nobody declared: %v", f.Sysctl)
	}
}

func TestParseSetsErrors(t *testing.T) {
	const mem = "M MemTotal: 1048576 kB\n"
	broken := Set{Name: "broken", Script: "true", Parse: func([]byte) (any, error) { return nil, errors.New("bad line") }}
	tests := []struct {
		name string
		out  string
		set  Set
		want string
	}{
		{"parser refuses", mem + "X broken\nY x\n", broken, "facts of broken: bad line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseGather([]byte(tc.out), tc.set)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v, want %s", err, tc.want)
			}
		})
	}
}

// TestParseSetsMissing: a set whose section is missing has no facts; the
// core facts and the other sets stand.
func TestParseSetsMissing(t *testing.T) {
	f, err := ParseGather([]byte("M MemTotal: 1048576 kB\nX there\nY a\n"), linesSet("missing", "true"), linesSet("there", "echo a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Modules["missing"]; ok || f.Module("there") == nil || f.MemTotal != 1<<30 {
		t.Fatalf("facts %+v", f)
	}
}

func TestCheckSets(t *testing.T) {
	tests := []struct {
		sets []Set
		want string
	}{
		{[]Set{{Name: "a"}, {Name: "b_2"}}, ""},
		{[]Set{{Name: "Bad"}}, `fact set "Bad": not a name`},
		{[]Set{{Name: "a;rm"}}, `fact set "a;rm": not a name`},
		{[]Set{{Name: "a"}, {Name: "a"}}, "fact set a declared twice"},
		{[]Set{{Name: "mem_total"}}, "fact set mem_total: the name of a core fact"},
		{[]Set{{Name: "a", Script: "true"}}, "fact set a: a script without a parser"},
	}
	for _, tc := range tests {
		err := CheckSets(tc.sets)
		if (tc.want == "" && err != nil) || (tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want))) {
			t.Errorf("CheckSets(%+v) = %v, want %q", tc.sets, err, tc.want)
		}
	}
}

// TestModuleFactsJSON: module facts sit beside the core facts, in
// expressions and in JSON, and survive a round trip exactly.
func TestModuleFactsJSON(t *testing.T) {
	f := &Facts{Hostname: "db1", MemTotal: 1 << 40, Modules: map[string]any{
		"zeta": map[string]any{"n": int64(1<<53 + 1)},
		"alfa": struct {
			Enabled string `json:"enabled"`
		}{"never"},
	}}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasPrefix(s, `{"hostname":"db1",`) || !strings.HasSuffix(s, `,"alfa":{"enabled":"never"},"zeta":{"n":9007199254740993}}`) {
		t.Errorf("JSON %s", s)
	}
	var back Facts
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.MemTotal != f.MemTotal || back.Hostname != "db1" {
		t.Errorf("core facts lost: %+v", back)
	}
	if n := back.Modules["zeta"].(map[string]any)["n"]; n != json.Number("9007199254740993") {
		t.Errorf("zeta.n = %#v", n)
	}
	vars, err := f.ScopeVars()
	if err != nil {
		t.Fatal(err)
	}
	if got := vars["alfa"].(map[string]any)["enabled"]; got != "never" {
		t.Errorf("facts.alfa.enabled = %v", got)
	}
	if got := vars["zeta"].(map[string]any)["n"]; got != int64(1<<53+1) {
		t.Errorf("facts.zeta.n = %#v", got)
	}
	plain, _ := json.Marshal(&Facts{Hostname: "db1"})
	if strings.Contains(string(plain), "Modules") || strings.Contains(string(plain), "modules") {
		t.Errorf("no module facts, yet %s", plain)
	}
}
