package facts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
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

// rawSet declares a fact set whose facts are its script's output as the
// gather handed it over.
func rawSet(name, script string) Set {
	return Set{Name: name, Script: script, Parse: func(out []byte) (any, error) { return string(out), nil }}
}

// TestGatherSetsOutputAsPrinted: a snippet's output reaches its parser
// line for line as printed, its end included (line breaks, a last line
// without one, a dot), however the snippet ends.
func TestGatherSetsOutputAsPrinted(t *testing.T) {
	tests := []struct{ name, script, want string }{
		{"lines", `echo one; echo two`, "one\ntwo\n"},
		{"no line break at the end", `printf 'a\nb'`, "a\nb\n"},
		{"empty lines at the end", `printf 'a\n\n\n'`, "a\n\n\n"},
		{"one empty line", `echo`, "\n"},
		{"nothing", `true`, ""},
		{"a dot at the end", `printf 'x.'`, "x.\n"},
		{"dots and a line break", `printf '..\n'`, "..\n"},
		{"exit after a dot", `printf 'x.'; exit 0`, "x.\n"},
		{"exit after empty lines", `printf 'a\n\n'; exit 3`, "a\n\n"},
		{"a program last", `echo a; printf 'b\n\n' | cat`, "a\nb\n\n"},
		{"standard error left out", `echo err >&2; echo out`, "out\n"},
		{"a heredoc's end word", `printf 'SETOUT\nx\n'`, "SETOUT\nx\n"},
	}
	var sets []Set
	for i, tc := range tests {
		sets = append(sets, rawSet(fmt.Sprintf("s%d", i), tc.script))
	}
	f, err := Gather(context.Background(), transport.NewLocal(), Options{Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range tests {
		if got := f.Modules[fmt.Sprintf("s%d", i)]; got != tc.want {
			t.Errorf("%s: facts %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestGatherSetsProcesses: a snippet costs the host one process (its
// subshell), not a second one to tag its output. Counted in a PID
// namespace, with snippets of builtins only.
func TestGatherSetsProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("counts processes in a PID namespace (root)")
	}
	ns := testhost.NewPIDNamespace(t)
	host := nsTransport{ns: ns, local: transport.NewLocal()}
	started := func(sets []Set) int {
		first := ns.NextPID(t)
		if _, err := Gather(context.Background(), host, Options{Sets: sets}); err != nil {
			t.Fatal(err)
		}
		return ns.NextPID(t) - 1 - first // less NextPID's own process
	}
	base := started(nil)
	for _, n := range []int{1, 3} {
		var sets []Set
		for i := range n {
			sets = append(sets, linesSet(fmt.Sprintf("s%d", i), `echo one; echo two`))
		}
		if got := started(sets) - base; got != n {
			t.Errorf("%d snippets started %d processes more than none; want %d (one each)", n, got, n)
		}
	}
}
