package pgconf

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pgtune/pgtune/engine"
)

// patroni.yml holds the member's local configuration, passwords among it:
// pgtune edits only the lines of postgresql.parameters it sets, keeps
// every other byte, checks that the file still says everything else it
// said, and never prints the file (plans show the parameters only).

// patroniLocal is what pgtune reads from a member's patroni.yml.
type patroniLocal struct {
	// Params are postgresql.parameters, as strings (the managed ones).
	Params map[string]string
	// Auth is restapi.authentication as "user:password" ("" when the
	// REST API asks for none): sent to the host's REST API on stdin.
	Auth string
}

// readPatroniConfig reads the member's patroni.yml from the host: the
// document (what an edit starts from) and what pgtune uses of it. Errors
// name the file, never its content (it holds passwords). Its path comes
// from a command line the cluster owner controls: it is read as the
// owner, so it can be no file the owner could not read (another
// cluster's, with the REST credentials sent to an address of its
// choosing).
func readPatroniConfig(ctx context.Context, t *engine.Target, file, owner string) ([]byte, *patroniLocal, error) {
	if owner == "" {
		return nil, nil, fmt.Errorf("read Patroni's config %s: the cluster owner is not known: pgtune reads it as the owner", file)
	}
	doc, ok, err := t.ReadFileAs(ctx, file, owner)
	if err != nil {
		return nil, nil, fmt.Errorf("Patroni's config: %v", err) // "read FILE: …" already
	}
	if !ok {
		return nil, nil, fmt.Errorf("read Patroni's config %s: no such file (or the cluster owner %s may not reach it)", file, owner)
	}
	local, err := readPatroniLocal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("Patroni's config %s: %w", file, err)
	}
	return doc, local, nil
}

// readPatroniLocal reads the managed parameters and the REST API's
// credentials out of patroni.yml.
func readPatroniLocal(doc []byte) (*patroniLocal, error) {
	var c struct {
		PostgreSQL struct {
			Parameters map[string]any `yaml:"parameters"`
		} `yaml:"postgresql"`
		RestAPI struct {
			Authentication struct {
				Username string `yaml:"username"`
				Password string `yaml:"password"`
			} `yaml:"authentication"`
		} `yaml:"restapi"`
	}
	if err := yaml.Unmarshal(doc, &c); err != nil {
		return nil, fmt.Errorf("not YAML pgtune can read: %v", yamlErrorLine(err))
	}
	l := &patroniLocal{Params: map[string]string{}}
	for k, v := range c.PostgreSQL.Parameters {
		for _, name := range managed {
			if asciiEqualFold(k, name) && v != nil {
				l.Params[name] = fmt.Sprint(v)
			}
		}
	}
	if a := c.RestAPI.Authentication; a.Username != "" {
		l.Auth = a.Username + ":" + a.Password
	}
	return l, nil
}

// yamlErrorLine keeps a YAML error to its position: yaml.v3 may quote the
// offending text, which in patroni.yml can be a password.
func yamlErrorLine(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "line "); i >= 0 {
		end := strings.IndexAny(msg[i:], ":")
		if end > 0 {
			return "error at " + msg[i:i+end]
		}
	}
	return "syntax error"
}

// setPatroniParams returns doc with postgresql.parameters holding set
// (name → value): an existing key's value is replaced on its line, a
// missing one added as a new line of the mapping (a missing parameters
// mapping is added under postgresql). Every other line is kept as it is;
// the result must decode to the same document but for those keys.
func setPatroniParams(doc []byte, set map[string]string) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("not YAML pgtune can read: %v", yamlErrorLine(err))
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("not a mapping at the top")
	}
	lines := strings.SplitAfter(string(doc), "\n")
	pgKey, pgVal := mappingEntry(root.Content[0], "postgresql")
	if pgVal == nil || pgVal.Kind != yaml.MappingNode || pgVal.Style&yaml.FlowStyle != 0 || len(pgVal.Content) == 0 {
		return nil, fmt.Errorf("no block mapping under postgresql: to edit")
	}
	_, params := mappingEntry(pgVal, "parameters")
	names := sortedKeys(set)
	switch {
	case params == nil || (params.Kind == yaml.ScalarNode && params.Tag == "!!null"):
		// No parameters yet: a new mapping right after "postgresql:".
		indent := strings.Repeat(" ", pgVal.Content[0].Column-1)
		add := indent + "parameters:\n"
		for _, n := range names {
			add += indent + "  " + n + ": " + yamlQuote(set[n]) + "\n"
		}
		if params != nil {
			return nil, fmt.Errorf("postgresql.parameters is empty (null): pgtune does not rewrite it")
		}
		lines = insertLines(lines, pgKey.Line, add)
	case params.Kind != yaml.MappingNode || params.Style&yaml.FlowStyle != 0 || len(params.Content) == 0:
		return nil, fmt.Errorf("postgresql.parameters is not a block mapping pgtune can edit line by line")
	default:
		indent := strings.Repeat(" ", params.Content[0].Column-1)
		var add string
		for _, n := range names {
			k, v := mappingEntryFold(params, n)
			if k == nil {
				add += indent + n + ": " + yamlQuote(set[n]) + "\n"
				continue
			}
			if v.Kind != yaml.ScalarNode || v.Line != k.Line || strings.Contains(v.Value, "\n") {
				return nil, fmt.Errorf("postgresql.parameters.%s is not a one-line value pgtune can replace", k.Value)
			}
			l := lines[v.Line-1]
			eol := l[len(strings.TrimRight(l, "\r\n")):]
			cut, ok := columnOffset(l, v.Column)
			if !ok {
				return nil, fmt.Errorf("postgresql.parameters.%s is not a one-line value pgtune can replace", k.Value)
			}
			repl := l[:cut] + yamlQuote(set[n])
			if v.LineComment != "" {
				repl += " " + v.LineComment
			}
			lines[v.Line-1] = repl + eol
		}
		if add != "" {
			lines = insertLines(lines, lastLine(params), add)
		}
	}
	out := []byte(strings.Join(lines, ""))
	if err := sameButParams(doc, out, set); err != nil {
		return nil, err
	}
	return out, nil
}

// sameButParams checks that after decodes to before with only
// postgresql.parameters' keys of set changed to set's values.
func sameButParams(before, after []byte, set map[string]string) error {
	var a, b map[string]any
	if err := yaml.Unmarshal(before, &a); err != nil {
		return fmt.Errorf("re-read: %v", yamlErrorLine(err))
	}
	if err := yaml.Unmarshal(after, &b); err != nil {
		return fmt.Errorf("the edited file is not YAML (%v): not written", yamlErrorLine(err))
	}
	pa, _ := a["postgresql"].(map[string]any)
	if pa == nil {
		return fmt.Errorf("no postgresql mapping")
	}
	params, _ := pa["parameters"].(map[string]any)
	if params == nil {
		params = map[string]any{}
	}
	for k, v := range set {
		key := k // an existing key keeps its spelling (Patroni ignores case)
		for have := range params {
			if asciiEqualFold(have, k) {
				key = have
			}
		}
		params[key] = v
	}
	pa["parameters"] = params
	if !reflect.DeepEqual(a, b) {
		return fmt.Errorf("the edit of postgresql.parameters would change more than those parameters: not written")
	}
	return nil
}

// mappingEntry finds key in a mapping node: its key and value nodes.
func mappingEntry(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// mappingEntryFold is mappingEntry ignoring case (PostgreSQL's names are).
func mappingEntryFold(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if asciiEqualFold(m.Content[i].Value, key) {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// asciiEqualFold compares parameter names as PostgreSQL and Patroni do:
// ASCII letters case-insensitively, every other byte as is (strings.EqualFold
// would match Unicode look-alikes: "ſhared_buffers" is not shared_buffers).
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// columnOffset is the byte offset in line of the 1-based character column
// the YAML parser reports (it counts characters, not bytes); false when
// the line is shorter.
func columnOffset(line string, col int) (int, bool) {
	if col < 1 {
		return 0, false
	}
	n := 1
	for i := range line {
		if n == col {
			return i, true
		}
		n++
	}
	return 0, false
}

// lastLine is the last line a block node's content reaches.
func lastLine(n *yaml.Node) int {
	last := n.Line
	for _, c := range n.Content {
		if l := lastLine(c); l > last {
			last = l
		}
	}
	return last
}

// insertLines puts text after line (1-based) of lines.
func insertLines(lines []string, after int, text string) []string {
	if after > len(lines) {
		after = len(lines)
	}
	if after > 0 && !strings.HasSuffix(lines[after-1], "\n") {
		lines[after-1] += "\n"
	}
	out := append([]string(nil), lines[:after]...)
	out = append(out, text)
	return append(out, lines[after:]...)
}

// yamlQuote single-quotes a value (YAML's single quotes escape only
// themselves), so "on" stays a string and not a boolean.
func yamlQuote(v string) string {
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
