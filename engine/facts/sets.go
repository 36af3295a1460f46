package facts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Set is the knowledge one module declares about hosts: the kernel keys it
// reads, and facts of its own gathered by a shell snippet inside the one
// gather round trip. The engine knows no module: it runs every declared
// snippet and hands each module's output to that module's parser.
type Set struct {
	// Name is the module's name. Its facts are facts.<Name> in policy
	// expressions and in `pgtune facts`, beside the core facts.
	Name string
	// Sysctls are the kernel keys whose live values (Facts.Sysctl) and
	// boot-time assignments (Facts.SysctlFiles) the module reads.
	Sysctls []string
	// Files are absolute paths of files the module's check reads
	// (Target.ReadFile): the gather reads them too where that is as safe
	// as ReadFile (files.go), and check answers from what it read.
	Files []string
	// Script is a POSIX sh snippet run inside the gather round trip, with
	// its privileges; its standard output goes to Parse. It is fixed
	// text: never built from inventory or host data. It must not exec
	// nor set an EXIT trap: the gather's trap marks where its output ends
	// (setsScript).
	Script string
	// Parse turns what Script printed into the module's facts: a value
	// that encodes as a JSON object. Output comes from the host: bound
	// every number, refuse what is malformed.
	Parse func(out []byte) (any, error)
	// PostmasterRuns are read-only commands the module's check runs for
	// the cluster's running postmaster, written with the placeholders
	// PMPid and PMOwner (prerun.go). The gather runs them ahead, with its
	// privileges (root, with become), for pg_data's or a lone running
	// postmaster, and the check's Run of the same command takes that
	// answer. Fixed text, like Script, and like it never host code: a
	// process a run left behind could write into the answers after it.
	// Set.Name must be the module's name (the play selects by it).
	PostmasterRuns [][]string
	// OwnerRuns are read-only scripts the module's check runs as the
	// cluster owner (OwnerRunArgs), for the running postmaster, written
	// with any placeholder (prerun.go), whole or inside an argument. The
	// gather runs them ahead, after every run as root, where it runs
	// PostmasterRuns and the script can tell the configuration file as
	// the controller will; a guess the check does not repeat word for
	// word costs the check its own run, never a wrong answer. Fixed text
	// that runs nothing found on the host (no binary of the cluster's):
	// a process it left behind could write into the answers after it.
	OwnerRuns []OwnerRun
}

// setName is what a set may be called: a word usable in expressions.
var setName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// CheckSets refuses sets that cannot be gathered side by side: bad or
// duplicate names, names of core facts, a script without a parser.
func CheckSets(sets []Set) error {
	seen := map[string]bool{}
	for _, s := range sets {
		switch {
		case !setName.MatchString(s.Name):
			return fmt.Errorf("fact set %q: not a name (%s)", s.Name, setName)
		case seen[s.Name]:
			return fmt.Errorf("fact set %s declared twice", s.Name)
		case coreFields()[s.Name]:
			return fmt.Errorf("fact set %s: the name of a core fact", s.Name)
		case s.Script != "" && s.Parse == nil:
			return fmt.Errorf("fact set %s: a script without a parser", s.Name)
		}
		for _, r := range s.PostmasterRuns {
			if err := checkPreRun(r); err != nil {
				return fmt.Errorf("fact set %s: postmaster run: %w", s.Name, err)
			}
		}
		for _, r := range s.OwnerRuns {
			if err := checkOwnerRun(r); err != nil {
				return fmt.Errorf("fact set %s: owner run: %w", s.Name, err)
			}
		}
		seen[s.Name] = true
	}
	return nil
}

// SysctlKeys is every kernel key the sets read, sorted, once each.
func SysctlKeys(sets []Set) []string {
	seen := map[string]bool{}
	var keys []string
	for _, s := range sets {
		for _, k := range s.Sysctls {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// setsScript runs every set's snippet after the core gather: "X name"
// opens a set's output and each line it prints follows as "Y line", so
// nothing a snippet prints can pass for a core fact or another set.
//
// A snippet runs in a command substitution (its own subshell: its exit
// and variables stay its own) and the gather's shell tags what it printed:
// one process per snippet, where a pipe into a tagging loop was two. The
// EXIT trap's "." ends the output, so that the line breaks at its end are
// kept as the pipe kept them (the snippet's exit runs the trap too).
func setsScript(sets []Set) string {
	var b strings.Builder
	b.WriteString(setsTagFn)
	for _, s := range sets {
		if s.Script == "" {
			continue
		}
		fmt.Fprintf(&b, "printf 'X %%s\\n' %s\nso=$(trap 'printf .' EXIT; { %s\n} 2>/dev/null)\ntagged\n", s.Name, s.Script)
	}
	return b.String()
}

// setsTagFn prints a snippet's output ($so, ended by the trap's ".") as
// "Y LINE" lines: a last line without a line break is a line, nothing is
// nothing. The shell drops NULs here as its read did from the pipe.
const setsTagFn = `tagged() {
  case $so in *.) so=${so%.};; esac
  [ -n "$so" ] || return 0
  so=${so%"
"}
  while IFS= read -r l; do printf 'Y %s\n' "$l"; done <<SETOUT
$so
SETOUT
}
`

// parseSets hands each set its output. A set whose section is missing
// (a host answering for other modules only, output cut short) has no
// facts: that module's check fails on its own, the others' facts stand.
func parseSets(sets []Set, outputs map[string][]byte) (map[string]any, error) {
	var mods map[string]any
	for _, s := range sets {
		if s.Script == "" {
			continue
		}
		out, ok := outputs[s.Name]
		if !ok {
			continue
		}
		v, err := s.Parse(out)
		if err != nil {
			return nil, fmt.Errorf("facts of %s: %w", s.Name, err)
		}
		if mods == nil {
			mods = map[string]any{}
		}
		mods[s.Name] = v
	}
	return mods, nil
}

// coreFields are the JSON names of Facts' own fields.
var coreFields = sync.OnceValue(func() map[string]bool {
	names := map[string]bool{}
	rt := reflect.TypeFor[Facts]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names[name] = true
		}
	}
	return names
})

// coreFacts is Facts without its methods, for encoding the core fields.
type coreFacts Facts

// MarshalJSON writes the core facts, then each module's facts under its
// name, in name order.
func (f Facts) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(coreFacts(f))
	if err != nil || len(f.Modules) == 0 {
		return b, err
	}
	names := make([]string, 0, len(f.Modules))
	for n := range f.Modules {
		names = append(names, n)
	}
	sort.Strings(names)
	out := bytes.TrimSuffix(b, []byte("}"))
	for _, n := range names {
		v, err := json.Marshal(f.Modules[n])
		if err != nil {
			return nil, fmt.Errorf("facts of %s: %w", n, err)
		}
		k, _ := json.Marshal(n)
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, k...), ':'), v...)
	}
	return append(out, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON wrote: fields that are not core
// facts are module facts, kept as decoded JSON (numbers exact).
func (f *Facts) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, (*coreFacts)(f)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var all map[string]any
	if err := dec.Decode(&all); err != nil {
		return err
	}
	f.Modules = nil
	for k, v := range all {
		if coreFields()[k] {
			continue
		}
		if f.Modules == nil {
			f.Modules = map[string]any{}
		}
		f.Modules[k] = v
	}
	return nil
}
