package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/mask"
)

// openInventory loads -i (else ansible.cfg's inventory, else localhost)
// with ansible.cfg's connection defaults and forks under the flags, and
// says the warnings once.
func (a *App) openInventory(o *options, pbDir string) (*inventory.Inventory, error) {
	cfg, err := inventory.FindAnsibleConfig()
	if err != nil {
		return nil, err
	}
	if cfg, err = inventory.WithAnsibleEnv(cfg); err != nil {
		return nil, err
	}
	opts := inventory.Options{PlaybookDir: pbDir}
	var warnings []string
	if cfg != nil {
		warnings = cfg.Warnings
		opts.Defaults = cfg.Defaults
		a.passwords.login = a.passwords.login || cfg.AskPass
		a.passwords.become = a.passwords.become || cfg.BecomeAskPass
		if cfg.Forks > 0 && !o.given["forks"] && !o.given["f"] {
			o.forks = cfg.Forks
		}
		if o.inventory == "" && len(cfg.Inventory) > 0 {
			if len(cfg.Inventory) > 1 {
				return nil, fmt.Errorf("%s: inventory names %d sources; pgtune takes one (pass -i, or a directory holding them)", cfg.File, len(cfg.Inventory))
			}
			o.inventory = cfg.Inventory[0]
		}
	}
	inv := inventory.Localhost()
	if env := os.Getenv("ANSIBLE_INVENTORY"); o.inventory == "" && env != "" {
		// Not taken (DESIGN: no -i is this machine), but never silently.
		warnings = append(warnings, fmt.Sprintf("ANSIBLE_INVENTORY is set (%s) but pgtune takes its inventory from -i or ansible.cfg: working on localhost; pass -i for those hosts", env))
	}
	if o.inventory != "" {
		if inv, err = inventory.Open(o.inventory, opts); err != nil {
			return nil, err
		}
		warnings = append(warnings, inv.Warnings...)
	}
	for _, w := range warnings {
		fmt.Fprintf(a.Stderr, "pgtune: warning: %s\n", safeText(w))
	}
	if err := a.askPasswords(inv); err != nil {
		return nil, err
	}
	return inv, nil
}

// playbookDir is where the playbook's group_vars/ and host_vars/ are; ""
// for the built-in policy.
func playbookDir(playbook string) string {
	if playbook == "" {
		return ""
	}
	return filepath.Dir(playbook)
}

const inventoryUsage = `Usage:
  pgtune inventory list [-i INVENTORY] [--host HOST] [--limit PATTERN] [--playbook-dir DIR] [--format text|json]

Shows every host as pgtune resolves it: its groups, how it is reached and
its vars (group_vars/ and host_vars/ merged), secrets masked. Where an
ssh_config sends a host elsewhere (a bastion, another HostName, port or
user), "route" says where pgtune really connects, as -vvv does. Touches no
host.
`

// runInventoryList is `pgtune inventory list`.
func (a *App) runInventoryList(o *options, host, pbDir string) int {
	inv, err := a.openInventory(o, pbDir)
	if err != nil {
		return a.fail(err)
	}
	hosts := inv.Hosts
	if o.limit != "" {
		if hosts, err = inv.Limit(hosts, o.limit); err != nil {
			return a.fail(err)
		}
	}
	if host != "" {
		h, ok := inv.Host(host)
		if !ok {
			return a.fail(fmt.Errorf("inventory: no host %q", host))
		}
		hosts = []*inventory.Host{h}
	}
	list := make([]listedHost, 0, len(hosts))
	for _, h := range hosts {
		list = append(list, describeHost(h))
	}
	if o.format == "json" {
		enc := json.NewEncoder(a.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"hosts": list}); err != nil {
			return a.fail(err)
		}
		return 0
	}
	for i, h := range list {
		if i > 0 {
			fmt.Fprintln(a.Stdout)
		}
		h.writeText(a.Stdout)
	}
	return 0
}

// listedHost is one host as `inventory list` shows it.
type listedHost struct {
	Name       string            `json:"name"`
	Source     string            `json:"source,omitempty"`
	Groups     []string          `json:"groups"`
	Connection map[string]any    `json:"connection"`
	Vars       map[string]any    `json:"vars"`
	Unusable   map[string]string `json:"unusable,omitempty"`
}

func describeHost(h *inventory.Host) listedHost {
	c := h.Conn
	conn := map[string]any{"connection": c.Connection}
	add := func(k string, v any) {
		if v != "" && v != 0 && v != false {
			conn[k] = v
		}
	}
	if c.Connection != "local" {
		add("address", c.Address)
		add("port", c.Port)
		add("user", c.User)
		add("private_key_file", c.PrivateKeyFile)
		add("known_hosts_file", c.KnownHostsFile)
		add("host_key_checking", c.HostKeyChecking)
		add("ssh_config_file", c.ConfigFile)
		add("proxy_jump", c.ProxyJump)
		add("proxy_command", mask.Text(c.ProxyCommand))
		add("route", resolvedRoute(h))
	}
	add("become", c.Become)
	add("pg_data", c.PGData)
	add("pg_bin", c.PGBin)
	add("pg_config_file", c.PGConfigFile)
	add("pg_restart", mask.Text(c.PGRestart))
	l := listedHost{Name: h.Name, Groups: h.Groups, Connection: conn, Vars: maskVars(h.Vars, sensitiveNames(h.Vars))}
	if h.File != "" {
		l.Source = fmt.Sprintf("%s:%d", h.File, h.Line)
	}
	for k, err := range h.Unusable {
		if l.Unusable == nil {
			l.Unusable = map[string]string{}
		}
		l.Unusable[k] = mask.Text(err.Error())
	}
	return l
}

// resolvedRoute is where pgtune really connects when an ssh_config (the
// inventory's ssh_config_file, else ~/.ssh/config and the system's) sends
// the host elsewhere than its inventory fields say: through a bastion, to
// another HostName, port or user. Resolved as the connection and -vvv
// resolve it (transport.DescribeRoute: a proxy command is named, never
// shown; no Match exec is run). "" when no ssh_config changes anything,
// so a host without ssh_config entries lists as before.
func resolvedRoute(h *inventory.Host) string {
	if h.ConnError() != nil {
		return "" // listed under unusable; the connection fails on it
	}
	route, fromConfig, err := transport.ResolvedRoute(engine.SSHConfigOf(h))
	switch {
	case !fromConfig:
		return ""
	case err != nil:
		return "not resolved: " + mask.Text(err.Error())
	}
	return route
}

// sensitiveNames are the vars listed in pgtune_sensitive.
func sensitiveNames(vars map[string]any) map[string]bool {
	out := map[string]bool{}
	switch l := vars[engine.SensitiveVar].(type) {
	case []any:
		for _, n := range l {
			if s, ok := n.(string); ok {
				out[s] = true
			}
		}
	case string:
		for _, s := range strings.Split(l, ",") {
			out[strings.TrimSpace(s)] = true
		}
	}
	return out
}

// maskVars hides the values of vars whose names say they are secrets (or
// that pgtune_sensitive lists) and the credentials inside other strings.
func maskVars(vars map[string]any, named map[string]bool) map[string]any {
	out := make(map[string]any, len(vars))
	for k, v := range vars {
		if named[k] || mask.SensitiveName(k) {
			out[k] = mask.Masked
			continue
		}
		out[k] = maskValue(v, named)
	}
	return out
}

func maskValue(v any, named map[string]bool) any {
	switch t := v.(type) {
	case string:
		return mask.Text(t)
	case map[string]any:
		return maskVars(t, named)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = maskValue(e, named)
		}
		return out
	}
	return v
}

func (h listedHost) writeText(w io.Writer) {
	fmt.Fprintf(w, "%s\n", safeText(h.Name))
	if h.Source != "" {
		fmt.Fprintf(w, "  listed at:  %s\n", safeText(h.Source))
	}
	fmt.Fprintf(w, "  groups:     %s\n", safeText(strings.Join(h.Groups, ", ")))
	writeMap(w, "  connection:", h.Connection)
	writeMap(w, "  vars:", h.Vars)
	if len(h.Unusable) > 0 {
		fmt.Fprintln(w, "  unusable (left out of vars):")
		keys := make([]string, 0, len(h.Unusable))
		for k := range h.Unusable {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "    %s\n", safeText(h.Unusable[k]))
		}
	}
}

func writeMap(w io.Writer, title string, m map[string]any) {
	fmt.Fprintln(w, title)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := m[k]
		s, ok := v.(string)
		if !ok {
			b, _ := json.Marshal(v)
			s = string(b)
		}
		fmt.Fprintf(w, "    %s: %s\n", safeText(k), safeText(s))
	}
}
