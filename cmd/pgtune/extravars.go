package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/inventory"
)

// extraVarsFlag is Ansible's -e: vars for the policy's expressions
// (vars.KEY) that win over the inventory's, for one run.
func extraVarsFlag(fs *pflag.FlagSet, o *options) {
	fs.StringArrayVarP(&o.extraVars, "extra-vars", "e", nil, "set vars for this run, over the inventory's (vars.KEY in the policy): `KEY=VALUE` pairs, @FILE (YAML or JSON), or inline {JSON or YAML}; repeatable, the last wins")
}

// parseExtraVars reads -e values as Ansible does: "@FILE" is a YAML or
// JSON file of vars, a value starting with { is an inline YAML or JSON
// mapping, anything else KEY=VALUE pairs separated by spaces (quote a
// value with spaces: name='a b'). An unquoted VALUE is a YAML scalar
// (numbers and booleans typed as in the inventory), a quoted one a
// string. Later values win. How hosts are reached is the inventory's to
// say: connection keys are refused, not silently ignored (they were
// resolved when it was loaded), and so are values pgtune cannot evaluate
// (Jinja, Vault).
func parseExtraVars(args []string) (map[string]any, error) {
	out := map[string]any{}
	for _, arg := range args {
		var err error
		switch trimmed := strings.TrimSpace(arg); {
		case strings.HasPrefix(trimmed, "@"):
			err = extraVarsFile(out, trimmed[1:])
		case strings.HasPrefix(trimmed, "{"):
			err = extraVarsYAML(out, "-e", []byte(arg))
		case strings.HasPrefix(trimmed, "["):
			err = fmt.Errorf("-e %q: inline vars must be a mapping ({\"name\": value}), not a list", arg)
		default:
			err = extraVarsPairs(out, arg)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// extraVarsFile reads -e @path.
func extraVarsFile(out map[string]any, path string) error {
	if path == "" {
		return fmt.Errorf("-e @: no file named after @")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("-e @%s: %w", path, err)
	}
	return extraVarsYAML(out, path, data)
}

// extraVarsYAML reads a YAML (or JSON, which is YAML) mapping of vars from
// file (a path, or "-e" for an inline value); every error names file and
// line.
func extraVarsYAML(out map[string]any, file string, data []byte) error {
	root, err := expr.ParseYAML(file, data)
	if err != nil {
		return err
	}
	if root == nil {
		return nil // an empty file sets nothing
	}
	if root.Kind != yaml.MappingNode {
		return &expr.PosError{File: file, Line: root.Line, Column: root.Column, Msg: "extra vars must be a mapping of names to values"}
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		at := func(n *yaml.Node, format string, args ...any) error {
			return &expr.PosError{File: file, Line: n.Line, Column: n.Column, Msg: fmt.Sprintf(format, args...)}
		}
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return at(k, "a var name must be a non-empty string")
		}
		if err := checkExtraVar(k.Value); err != nil {
			return at(k, "%v", err)
		}
		if v.Tag == "!vault" {
			return at(v, "%s", vaultMessage(k.Value))
		}
		var val any
		if err := v.Decode(&val); err != nil {
			return at(v, "%s: %v", k.Value, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if err := usableValue(k.Value, val); err != nil {
			return at(v, "%v", err)
		}
		if val == nil {
			val = ""
		}
		out[k.Value] = val
	}
	return nil
}

// extraVarsPairs reads KEY=VALUE pairs separated by unquoted spaces.
func extraVarsPairs(out map[string]any, arg string) error {
	words, err := splitQuoted(arg)
	if err != nil {
		return fmt.Errorf("-e %q: %w", arg, err)
	}
	if len(words) == 0 {
		return fmt.Errorf("-e %q: expected KEY=VALUE, @FILE or {inline vars}", arg)
	}
	for _, w := range words {
		k, v, ok := strings.Cut(w.text, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || w.quotedBefore(len(k)) {
			return fmt.Errorf("-e %q: expected KEY=VALUE, @FILE or {inline vars}", w.text)
		}
		if err := checkExtraVar(k); err != nil {
			return fmt.Errorf("-e %v", err)
		}
		var val any = v
		if !w.quoted {
			if err := yaml.Unmarshal([]byte(v), &val); err != nil || isCollection(val) {
				val = v
			}
		}
		if val == nil {
			val = ""
		}
		if err := usableValue(k, val); err != nil {
			return fmt.Errorf("-e %v", err)
		}
		out[k] = val
	}
	return nil
}

// word is one KEY=VALUE of -e with its quotes removed.
type word struct {
	text      string
	quoted    bool // some part was quoted: the value is a string
	firstQuot int  // byte offset in text where the first quoted part starts
}

// quotedBefore reports a quote inside the key ('a b'=1).
func (w word) quotedBefore(n int) bool { return w.quoted && w.firstQuot < n }

// splitQuoted splits s at unquoted white space, as a shell would for
// single and double quotes (a backslash escapes the next character inside
// double quotes and outside quotes).
func splitQuoted(s string) ([]word, error) {
	var out []word
	var cur strings.Builder
	w := word{firstQuot: -1}
	in := false // cur holds a word (possibly empty, e.g. k='')
	var quote rune
	escaped := false
	flush := func() {
		if in {
			w.text = cur.String()
			out = append(out, w)
		}
		cur.Reset()
		w, in = word{firstQuot: -1}, false
	}
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, in = true, true
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
			if !w.quoted {
				w.quoted, w.firstQuot = true, cur.Len()
			}
		case unicode.IsSpace(r):
			flush()
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if escaped {
		cur.WriteRune('\\')
	}
	flush()
	return out, nil
}

// checkExtraVar refuses the keys -e may not set.
func checkExtraVar(k string) error {
	if connectionVar(k) {
		return fmt.Errorf("%s: connection settings come from the inventory, not -e", k)
	}
	return nil
}

// usableValue refuses values pgtune cannot evaluate, before any host is
// contacted: -e applies to every host.
func usableValue(k string, v any) error {
	switch t := v.(type) {
	case string:
		if strings.HasPrefix(t, "$ANSIBLE_VAULT;") {
			return fmt.Errorf("%s", vaultMessage(k))
		}
		if strings.Contains(t, "{{") || strings.Contains(t, "{%") {
			return fmt.Errorf("%s: %s is a Jinja template, which pgtune does not evaluate (pgtune expressions are ${ }); give the value itself", k, strconv.Quote(t))
		}
	case []any:
		for _, e := range t {
			if err := usableValue(k, e); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range t {
			if err := usableValue(k, e); err != nil {
				return err
			}
		}
	}
	return nil
}

func vaultMessage(k string) string {
	return k + " is encrypted with Ansible Vault, which pgtune does not decrypt: give the plain value (ansible-vault view shows it) in a vars file only you can read, -e @FILE"
}

func isCollection(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// connectionVar reports the inventory keys that say how a host is reached
// or how PostgreSQL is found there.
func connectionVar(k string) bool {
	switch k {
	case "connection", "become", "pg_data", "pg_bin", "pg_config_file", "pg_restart":
		return true
	}
	return strings.HasPrefix(k, "ssh_") || strings.HasPrefix(k, "ansible_")
}

// applyExtraVars sets -e's vars on every targeted host. A var -e sets
// replaces the inventory's, an unusable one (Jinja, Vault) included.
func applyExtraVars(o *options, hosts []*inventory.Host) error {
	if len(o.extraVars) == 0 {
		return nil
	}
	vars, err := parseExtraVars(o.extraVars)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		merged := make(map[string]any, len(h.Vars)+len(vars))
		for k, v := range h.Vars {
			merged[k] = v
		}
		for k, v := range vars {
			merged[k] = v
			delete(h.Unusable, k)
		}
		h.Vars = merged
	}
	return nil
}
