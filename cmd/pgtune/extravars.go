package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/pgtune/pgtune/engine/inventory"
)

// extraVarsFlag is Ansible's -e KEY=VALUE: vars for the policy's
// expressions (vars.KEY) that win over the inventory's, for one run.
func extraVarsFlag(fs *pflag.FlagSet, o *options) {
	fs.StringArrayVarP(&o.extraVars, "extra-vars", "e", nil, "set `KEY=VALUE` for this run, over the inventory's vars (vars.KEY in the policy); repeatable")
}

// parseExtraVars reads KEY=VALUE pairs; VALUE is a YAML scalar (numbers
// and booleans typed as in the inventory). How hosts are reached is the
// inventory's to say: connection keys are refused, not silently ignored
// (they were resolved when it was loaded).
func parseExtraVars(pairs []string) (map[string]any, error) {
	out := map[string]any{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("-e %q: expected KEY=VALUE (files and JSON are not supported)", p)
		}
		if connectionVar(k) {
			return nil, fmt.Errorf("-e %s: connection settings come from the inventory, not -e", k)
		}
		var val any
		if err := yaml.Unmarshal([]byte(v), &val); err != nil || isCollection(val) {
			val = v
		}
		if val == nil {
			val = ""
		}
		out[k] = val
	}
	return out, nil
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

// applyExtraVars sets -e's vars on every targeted host.
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
		}
		h.Vars = merged
	}
	return nil
}
