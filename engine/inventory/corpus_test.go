package inventory

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The corpus: testdata/corpus/CASE/ holds inventories shaped like real
// ones (INI with comments, ranges, children and vars; YAML with
// group_vars/ and host_vars/ directories; inventory directories;
// ansible-inventory JSON; host lists). CASE/SOURCE is the -i argument
// (relative to CASE/), CASE/PLAYBOOK_DIR, when present, the playbook
// directory. Each case is loaded by pgtune and by ansible-inventory --list
// and the hosts, their groups and their vars must agree.

type corpusCase struct {
	name, dir, source, playbookDir string
}

func corpusCases(t *testing.T) []corpusCase {
	t.Helper()
	dirs, err := filepath.Glob("testdata/corpus/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	var out []corpusCase
	for _, d := range dirs {
		src, err := os.ReadFile(filepath.Join(d, "SOURCE"))
		if err != nil {
			t.Fatal(err)
		}
		c := corpusCase{name: filepath.Base(d), dir: d, source: strings.TrimSpace(string(src))}
		if pb, err := os.ReadFile(filepath.Join(d, "PLAYBOOK_DIR")); err == nil {
			c.playbookDir = strings.TrimSpace(string(pb))
		}
		out = append(out, c)
	}
	return out
}

// resolved is what both tools must agree on.
type resolved struct {
	Groups map[string][]string       // host → groups it is in (not "all")
	Vars   map[string]map[string]any // host → vars, JSON-normalised
	Conn   map[string]string         // host → "user@address:port" pgtune dials
}

func (c corpusCase) sourcePath() string {
	if strings.Contains(c.source, ",") {
		return c.source
	}
	return filepath.Join(c.dir, c.source)
}

func pgtuneResolved(t *testing.T, c corpusCase) resolved {
	t.Helper()
	o := Options{}
	if c.playbookDir != "" {
		o.PlaybookDir = filepath.Join(c.dir, c.playbookDir)
	}
	inv, err := Open(c.sourcePath(), o)
	if err != nil {
		t.Fatalf("pgtune: %v", err)
	}
	r := resolved{Groups: map[string][]string{}, Vars: map[string]map[string]any{}, Conn: map[string]string{}}
	for _, h := range inv.Hosts {
		r.Conn[h.Name] = fmt.Sprintf("%s@%s:%d", h.Conn.User, h.Conn.Address, h.Conn.Port)
		r.Groups[h.Name] = slices.DeleteFunc(slices.Clone(h.Groups), func(g string) bool { return g == "all" })
		r.Vars[h.Name] = jsonNormal(t, h.Vars)
		for k := range h.Unusable {
			r.Vars[h.Name][k] = "(unusable)"
		}
	}
	return r
}

func jsonNormal(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// ansibleList is the shape of ansible-inventory --list output.
type ansibleList map[string]json.RawMessage

func ansibleResolved(t *testing.T, c corpusCase, bin string) resolved {
	t.Helper()
	src := c.source
	if filepath.Ext(src) == ".json" {
		// Ansible reads --list output from an inventory script.
		abs, err := filepath.Abs(filepath.Join(c.dir, src))
		if err != nil {
			t.Fatal(err)
		}
		src = filepath.Join(t.TempDir(), "inventory.sh")
		if err := os.WriteFile(src, []byte("#!/bin/sh\nexec cat '"+abs+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"-i", src, "--list"}
	if c.playbookDir != "" {
		args = append(args, "--playbook-dir", c.playbookDir)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = c.dir
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "ANSIBLE_LOCAL_TEMP="+home, "ANSIBLE_INVENTORY_UNPARSED_FAILED=true", "LC_ALL=C.UTF-8")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ansible-inventory %v: %v\n%s", args, err, stderr.String())
	}
	var list ansibleList
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("ansible-inventory output: %v\n%s", err, out)
	}
	type group struct {
		Hosts    []string `json:"hosts"`
		Children []string `json:"children"`
	}
	groups := map[string]group{}
	var meta struct {
		Hostvars map[string]map[string]any `json:"hostvars"`
	}
	for name, raw := range list {
		if name == "_meta" {
			if err := json.Unmarshal(raw, &meta); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var g group
		if err := json.Unmarshal(raw, &g); err != nil {
			t.Fatal(err)
		}
		groups[name] = g
	}
	member := map[string]map[string]bool{}
	var add func(g, into string)
	add = func(g, into string) {
		for _, h := range groups[g].Hosts {
			if member[h] == nil {
				member[h] = map[string]bool{}
			}
			member[h][into] = true
		}
		for _, c := range groups[g].Children {
			add(c, into)
		}
	}
	for g := range groups {
		add(g, g)
	}
	r := resolved{Groups: map[string][]string{}, Vars: map[string]map[string]any{}, Conn: map[string]string{}}
	for h, gs := range member {
		r.Conn[h] = ansibleConn(h, meta.Hostvars[h])
		for g := range gs {
			if g != "all" {
				r.Groups[h] = append(r.Groups[h], g)
			}
		}
		sort.Strings(r.Groups[h])
		r.Vars[h] = meta.Hostvars[h]
		if r.Vars[h] == nil {
			r.Vars[h] = map[string]any{}
		}
	}
	return r
}

// ansibleConn is where Ansible's ssh connection goes for a host's vars:
// ansible_host, ansible_port and ansible_user, or their ansible_ssh_*
// spellings.
func ansibleConn(host string, vars map[string]any) string {
	// The ssh plugin's lists: the last one set wins.
	last := func(def string, keys ...string) string {
		for _, k := range keys {
			if v, ok := vars[k]; ok {
				def = fmt.Sprint(v)
			}
		}
		return def
	}
	return fmt.Sprintf("%s@%s:%s", last("", "ansible_user", "ansible_ssh_user"),
		last(host, "ansible_host", "ansible_ssh_host"), last("0", "ansible_port", "ansible_ssh_port"))
}

func TestCorpusAgainstAnsible(t *testing.T) {
	bin, lookErr := exec.LookPath("ansible-inventory")
	for _, c := range corpusCases(t) {
		t.Run(c.name, func(t *testing.T) {
			got := pgtuneResolved(t, c)
			if testing.Short() {
				t.Skip("comparison with ansible-inventory runs without -short")
			}
			if lookErr != nil {
				t.Fatalf("ansible-inventory is not installed (%v): run scripts/deps.sh", lookErr)
			}
			want := ansibleResolved(t, c, bin)
			// Jinja and vault values are kept by Ansible, unusable for pgtune.
			for h, vars := range got.Vars {
				for k, v := range vars {
					if v == "(unusable)" {
						if _, ok := want.Vars[h][k]; ok {
							want.Vars[h][k] = v
						}
					}
				}
			}
			if !reflect.DeepEqual(sortedKeys(got.Groups), sortedKeys(want.Groups)) {
				t.Fatalf("hosts differ:\npgtune:  %v\nansible: %v", sortedKeys(got.Groups), sortedKeys(want.Groups))
			}
			for _, h := range sortedKeys(want.Groups) {
				if !reflect.DeepEqual(got.Groups[h], want.Groups[h]) {
					t.Errorf("host %s: groups differ:\npgtune:  %v\nansible: %v", h, got.Groups[h], want.Groups[h])
				}
				if got.Conn[h] != want.Conn[h] {
					t.Errorf("host %s: connection differs: pgtune %s, ansible %s", h, got.Conn[h], want.Conn[h])
				}
				if !reflect.DeepEqual(got.Vars[h], want.Vars[h]) {
					t.Errorf("host %s: vars differ:\npgtune:  %v\nansible: %v", h, got.Vars[h], want.Vars[h])
				}
			}
		})
	}
}

// TestCorpusSubscriptsAgainstAnsible: G[i] picks, for every i, the host
// Ansible's ansible --list-hosts 'G[0:]' lists i-th, and G[n] past them
// none. Groups with grandchildren are left out: Ansible walks that level
// as a set, in an order that varies between runs.
func TestCorpusSubscriptsAgainstAnsible(t *testing.T) {
	if testing.Short() {
		t.Skip("comparison with ansible runs without -short")
	}
	for _, c := range corpusCases(t) {
		if filepath.Ext(c.source) == ".json" {
			continue // ansible reads it only through a script
		}
		t.Run(c.name, func(t *testing.T) {
			o := Options{}
			if c.playbookDir != "" {
				o.PlaybookDir = filepath.Join(c.dir, c.playbookDir)
			}
			inv, err := Open(c.sourcePath(), o)
			if err != nil {
				t.Fatal(err)
			}
			src := c.sourcePath()
			if !strings.Contains(src, ",") {
				if src, err = filepath.Abs(src); err != nil {
					t.Fatal(err)
				}
			}
			var groups, patterns []string
			for _, g := range sortedKeys(inv.Groups) {
				deep := false
				for _, k := range inv.Groups[g].Children {
					deep = deep || len(inv.Groups[k].Children) > 0
				}
				if !deep {
					groups = append(groups, g)
					patterns = append(patterns, g+"[0:]")
				}
			}
			answers := ansibleHosts(t, src, patterns)
			for n, g := range groups {
				want := answers[n]
				var got []string
				for i := 0; i <= len(want); i++ {
					hs, err := inv.Match(fmt.Sprintf("%s[%d]", g, i))
					if err != nil {
						t.Errorf("%s[%d]: %v", g, i, err)
						break
					}
					for _, h := range hs {
						got = append(got, h.Name)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("group %s: subscripts pick %v, ansible %v", g, got, want)
				}
			}
		})
	}
}
