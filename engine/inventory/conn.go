package inventory

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine/expr"
)

// connField is one Conn setting: its canonical key, and how a raw var
// value becomes the setting (or why it cannot).
type connField struct {
	canonical string
	// own: canonical is pgtune's key, not one of Ansible's spellings.
	own bool
	// ansible: Ansible's spellings, in the order of its connection and
	// become plugins' variable lists, where the last one set wins
	// whatever level set it (ansible_ssh_host over ansible_host).
	ansible []string
	parse   func(v any) (any, error)
	set     func(c *Conn, v any)
}

// connKeys maps every accepted spelling (pgtune's key and the Ansible
// aliases an existing inventory uses) to its field.
var connKeys = map[string]connField{}

// connOrder lists the canonical keys (resolve says which spelling wins).
var connOrder []string

func init() {
	str := func(what string) func(any) (any, error) {
		return func(v any) (any, error) { return textValue(what, v) }
	}
	// aliases are Ansible's spellings in its plugins' order (see
	// connField.ansible); a canonical key spelt ansible_* is one of them.
	add := func(canonical string, aliases []string, parse func(any) (any, error), set func(*Conn, any)) {
		f := connField{canonical: canonical, parse: parse, set: set, own: !strings.HasPrefix(canonical, "ansible_"), ansible: aliases}
		if !f.own {
			f.ansible = append([]string{canonical}, aliases...)
		}
		connOrder = append(connOrder, canonical)
		connKeys[canonical] = f
		for _, a := range aliases {
			connKeys[a] = f
		}
	}
	add("connection", []string{"ansible_connection"}, parseConnection, func(c *Conn, v any) { c.Connection = v.(string) })
	add("ssh_host", []string{"ansible_host", "ansible_ssh_host"}, str("address"), func(c *Conn, v any) { c.Address = v.(string) })
	add("ssh_port", []string{"ansible_port", "ansible_ssh_port"}, parsePort, func(c *Conn, v any) { c.Port = v.(int) })
	add("ssh_user", []string{"ansible_user", "ansible_ssh_user"}, str("user"), func(c *Conn, v any) { c.User = v.(string) })
	add("ssh_private_key_file", []string{"ansible_private_key_file", "ansible_ssh_private_key_file"}, str("path"), func(c *Conn, v any) { c.PrivateKeyFile = v.(string) })
	add("ssh_known_hosts_file", nil, str("path"), func(c *Conn, v any) { c.KnownHostsFile = v.(string) })
	add("ssh_host_key_checking", nil, parseHostKeyChecking, func(c *Conn, v any) { c.HostKeyChecking = v.(string) })
	add("ssh_config_file", nil, str("path"), func(c *Conn, v any) { c.ConfigFile = v.(string) })
	add("become", []string{"ansible_become"}, parseBecome, func(c *Conn, v any) { c.Become = v.(bool) })
	// Passwords keep Ansible's names: pgtune has no spelling of its own.
	add("ansible_password", []string{"ansible_ssh_pass", "ansible_ssh_password"}, str("password"), func(c *Conn, v any) { c.Password = v.(string) })
	add("ansible_become_password", []string{"ansible_become_pass", "ansible_sudo_pass", "ansible_sudo_password"}, str("password"), func(c *Conn, v any) { c.BecomePassword = v.(string) })
	add("pg_data", nil, str("path"), func(c *Conn, v any) { c.PGData = v.(string) })
	add("pg_bin", nil, str("path"), func(c *Conn, v any) { c.PGBin = v.(string) })
	add("pg_config_file", nil, str("path"), func(c *Conn, v any) { c.PGConfigFile = v.(string) })
	add("pg_restart", nil, str("command"), func(c *Conn, v any) { c.PGRestart = v.(string) })
}

// resolve computes a host's Conn from its var levels, least specific
// first. Every value was checked where it was written, so errors here
// only concern the host name used as the default address.
func resolve(host string, levels [][]varDef, defaults ConnDefaults) (Conn, error) {
	c := Conn{Connection: "ssh"} // HostKeyChecking "": the ssh_config decides, else strict
	addrSet := false
	dir := ""
	extra := map[string]varDef{} // the Ansible vars resolved after the levels
	// Per spelling, its most specific definition (the last one within a
	// level). Then per setting, as Ansible does among its spellings: the
	// last of its plugin's list that is set, from whatever level
	// (ansible_ssh_host set for a group beats a host's ansible_host);
	// and between that and pgtune's own key, the more specific level, the
	// own key at the same one.
	type def struct {
		d     varDef
		level int
	}
	spelt := map[string]def{}
	for li, level := range levels {
		for _, d := range level {
			if unusable(d) != nil {
				continue // in Host.Unusable: the host fails when it connects
			}
			if ansibleExtraKeys[d.key] {
				extra[d.key] = d
			}
			if _, ok := connKeys[d.key]; ok {
				spelt[d.key] = def{d, li}
			}
		}
	}
	for _, canonical := range connOrder {
		f := connKeys[canonical]
		var pick *def
		for _, k := range f.ansible {
			if d, ok := spelt[k]; ok {
				pick = &d
			}
		}
		if own, ok := spelt[canonical]; ok && f.own && (pick == nil || own.level >= pick.level) {
			pick = &own
		}
		if pick == nil {
			continue
		}
		d := pick.d
		v, err := f.parse(d.value)
		if err != nil {
			return Conn{}, d.errAt("host %q: %s: %v", host, d.key, err)
		}
		f.set(&c, v)
		switch canonical {
		case "ssh_host":
			addrSet = true
		case "ssh_config_file":
			dir = filepath.Dir(d.file)
		}
	}
	if !addrSet {
		c.Address = host
	}
	if defaults.SSHArgs != "" {
		// Ansible puts ansible.cfg's ssh_args first on ssh's command line.
		extra["ansible.cfg ssh_args"] = varDef{key: "ssh_args", value: defaults.SSHArgs, file: defaults.File}
	}
	if err := applyAnsibleExtras(host, &c, extra); err != nil {
		return Conn{}, err
	}
	if c.User == "" {
		c.User = defaults.User
	}
	if c.PrivateKeyFile == "" {
		c.PrivateKeyFile = defaults.PrivateKeyFile
	}
	if c.HostKeyChecking == "" {
		c.HostKeyChecking = defaults.HostKeyChecking
	}
	if c.ConfigFile != "" && !filepath.IsAbs(c.ConfigFile) && !strings.HasPrefix(c.ConfigFile, "~") {
		c.ConfigFile = filepath.Join(dir, c.ConfigFile)
	}
	return c, nil
}

// checkText refuses what no quoting can make safe in an address, a user
// name or a path: a line break ends a command, NUL ends a C string.
func checkText(what, s string) error {
	if i := strings.IndexAny(s, "\n\r\x00"); i >= 0 {
		return fmt.Errorf("%s %q contains a line break or NUL", what, s)
	}
	return nil
}

func textValue(what string, v any) (any, error) {
	var s string
	switch t := v.(type) {
	case string:
		s = t
	case int, int64, uint64, float64, bool:
		s = fmt.Sprint(t)
	default:
		return nil, fmt.Errorf("expected a string, got %s", show(v))
	}
	if s == "" {
		return nil, fmt.Errorf("empty %s", what)
	}
	if err := checkText(what, s); err != nil {
		return nil, err
	}
	return s, nil
}

func parseConnection(v any) (any, error) {
	s, _ := v.(string)
	switch strings.TrimPrefix(s, "ansible.builtin.") {
	case "ssh", "smart", "paramiko", "paramiko_ssh": // smart is Ansible's default: ssh
		return "ssh", nil
	case "local":
		return "local", nil
	}
	return nil, fmt.Errorf("expected ssh or local, got %s", show(v))
}

func parsePort(v any) (any, error) {
	n, err := parseInt(v)
	if err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("expected a port number (1-65535), got %s", show(v))
	}
	return n, nil
}

func parseHostKeyChecking(v any) (any, error) {
	s, _ := v.(string)
	switch s {
	case "strict", "accept-new":
		return s, nil
	}
	return nil, fmt.Errorf("expected strict or accept-new, got %s", show(v))
}

// parseBecome accepts the booleans Ansible accepts.
func parseBecome(v any) (any, error) {
	switch t := v.(type) {
	case bool:
		return t, nil
	case int:
		if t == 0 || t == 1 {
			return t == 1, nil
		}
	case string:
		if b, ok := expr.ParseBool(t); ok {
			return b, nil
		}
	}
	return nil, fmt.Errorf("expected a boolean (yes/no/true/false), got %s", show(v))
}

// expandHost expands Ansible host ranges (db[01:03], node-[a:c],
// web[0:10:5]) and splits a trailing :PORT.
func expandHost(pattern string) (names []string, port string, err error) {
	if addr, port, ok, err := bracketedHost(pattern); ok {
		return []string{addr}, port, err
	}
	var colons []int // outside [ranges]
	depth := 0
	for i, c := range pattern {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case ':':
			if depth == 0 {
				colons = append(colons, i)
			}
		}
	}
	// One colon is NAME:PORT; more is an IPv6 address, kept whole.
	if len(colons) == 1 {
		i := colons[0]
		if _, err := strconv.Atoi(pattern[i+1:]); err != nil || i == 0 {
			return nil, "", fmt.Errorf("expected NAME or NAME:PORT")
		}
		pattern, port = pattern[:i], pattern[i+1:]
	}
	names, err = expandRanges(pattern, 0)
	return names, port, err
}

// bracketedHost reads [IPv6], [IPv6]:PORT and [NAME]:PORT (an IPv4
// address or a host name) as Ansible does; ok says it is one of these, not
// a range such as [1:3]. An IPv6 address may carry a zone (fe80::1%eth0)
// or be IPv4-mapped (::ffff:10.0.0.1): Ansible takes both, and a whole
// inventory failed on them.
func bracketedHost(pattern string) (addr, port string, ok bool, err error) {
	rest, found := strings.CutPrefix(pattern, "[")
	if !found {
		return "", "", false, nil
	}
	addr, after, found := strings.Cut(rest, "]")
	if !found {
		return "", "", false, nil
	}
	ip, ipErr := netip.ParseAddr(addr)
	v6 := ipErr == nil && ip.Is6()
	named := !v6 && addr != "" && !strings.ContainsAny(addr, "[]:")
	p, hasPort := strings.CutPrefix(after, ":")
	switch {
	case v6 && after == "":
		return addr, "", true, nil
	case v6 || named && hasPort:
		if hasPort && p != "" && strings.Trim(p, "0123456789") == "" {
			return addr, p, true, nil
		}
		return "", "", true, fmt.Errorf("expected [IPv6], [IPv6]:PORT or [NAME]:PORT")
	}
	return "", "", false, nil
}

const maxExpanded = 100000

func expandRanges(s string, total int) ([]string, error) {
	open := strings.Index(s, "[")
	if open < 0 {
		if strings.Contains(s, "]") {
			return nil, fmt.Errorf("unbalanced ]")
		}
		return []string{s}, nil
	}
	end := strings.Index(s[open:], "]")
	if end < 0 {
		return nil, fmt.Errorf("unbalanced [")
	}
	end += open
	head, body, tail := s[:open], s[open+1:end], s[end+1:]
	parts := strings.Split(body, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("range [%s] must be [start:end] or [start:end:step]", body)
	}
	step := 1
	if len(parts) == 3 {
		n, err := strconv.Atoi(parts[2])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("range [%s]: bad step", body)
		}
		step = n
	}
	var items []string
	lo, hi := parts[0], parts[1]
	if a, errA := strconv.Atoi(lo); errA == nil {
		b, errB := strconv.Atoi(hi)
		if errB != nil || b < a || a < 0 {
			return nil, fmt.Errorf("range [%s]: bad bounds", body)
		}
		if (b-a)/step+1 > maxExpanded {
			return nil, fmt.Errorf("range [%s] is too large", body)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' { // zero padding: [01:10]
			width = len(lo)
		}
		for i := a; i <= b; i += step {
			items = append(items, fmt.Sprintf("%0*d", width, i))
		}
	} else {
		if len(lo) != 1 || len(hi) != 1 || !isLetter(lo[0]) || !isLetter(hi[0]) || hi[0] < lo[0] {
			return nil, fmt.Errorf("range [%s]: bad bounds", body)
		}
		for c := int(lo[0]); c <= int(hi[0]); c += step {
			items = append(items, string(rune(c)))
		}
	}
	rest, err := expandRanges(tail, total)
	if err != nil {
		return nil, err
	}
	if len(items)*len(rest) > maxExpanded {
		return nil, fmt.Errorf("host range expands to too many hosts")
	}
	var out []string
	for _, it := range items {
		for _, r := range rest {
			out = append(out, head+it+r)
		}
	}
	return out, nil
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
