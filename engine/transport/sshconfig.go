package transport

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Host-key policies accepted in SSHConfig.HostKeyPolicy.
const (
	HostKeyStrict    = "strict"
	HostKeyAcceptNew = "accept-new"
)

// endpoint is one SSH hop fully resolved: the target host or a jump host.
type endpoint struct {
	name       string // inventory name or ProxyJump alias, for messages
	host       string // address dialled
	port       int
	user       string
	keyFiles   []string // tried in order, before the agent's keys
	agent      bool     // offer the SSH agent's keys too
	knownHosts []string // user files; the first one receives accept-new lines (none: UserKnownHostsFile none)
	policy     string

	globalKnownHosts []string // GlobalKnownHostsFile: read, never written
	hostKeyAlias     string   // HostKeyAlias: the known_hosts name instead of host[:port]
	proxyCommand     string   // ProxyCommand, tokens expanded: run locally, its stdio is the stream
	password         string   // tried after the keys; the target only
	jump             bool     // a jump host, not the target (messages)
}

// hostPort is the address as dialled and as recorded in known_hosts.
func (e *endpoint) hostPort() string { return net.JoinHostPort(e.host, strconv.Itoa(e.port)) }

// route is the resolved connection: zero or more jump hosts, then the target.
type route struct {
	jumps   []*endpoint
	target  *endpoint
	timeout time.Duration
}

// unquote strips the double quotes `vagrant ssh-config` puts around paths
// with spaces.
func unquote(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// splitWords splits a UserKnownHostsFile value into its files, honouring
// double quotes.
func splitWords(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			have = true
		case (r == ' ' || r == '\t') && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// expandHome expands a leading ~ or ~/ to home.
func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

// expandPath expands a leading ~ and the OpenSSH tokens %h %p %r %u %d %%.
// Other tokens, and a lone % at the end, are kept as written.
func expandPath(p string, e *endpoint, localUser, home string) string {
	p = expandHome(p, home)
	out, _, _ := expandTokens(p, func(c byte) (string, bool) {
		switch c {
		case 'u':
			return localUser, true
		case 'd':
			return home, true
		}
		return endpointToken(c, e)
	}, true)
	return out
}

// endpointToken is the value of the tokens every directive knows: %h
// (HostName), %p, %r and %%.
func endpointToken(c byte, e *endpoint) (string, bool) {
	switch c {
	case 'h':
		return e.host, true
	case 'p':
		return strconv.Itoa(e.port), true
	case 'r':
		return e.user, true
	case '%':
		return "%", true
	}
	return "", false
}

// expandTokens replaces the %-tokens of s with what value gives. With
// keep, a token value does not know (and a lone % at the end) stays as
// written; without, expansion stops there and returns that token's letter
// (0 for a lone %) with ok false.
func expandTokens(s string, value func(byte) (string, bool), keep bool) (out string, ok bool, bad byte) {
	if !strings.Contains(s, "%") {
		return s, true, 0
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			if !keep {
				return "", false, 0
			}
			b.WriteByte('%')
			continue
		}
		i++
		v, known := value(s[i])
		switch {
		case known:
			b.WriteString(v)
		case keep:
			b.WriteByte('%')
			b.WriteByte(s[i])
		default:
			return "", false, s[i]
		}
	}
	return b.String(), true, 0
}

// policyFromStrict maps StrictHostKeyChecking to our two policies. "no"
// and "off" still refuse a changed key: we never connect to a host whose
// recorded key differs.
func policyFromStrict(v string) (string, error) {
	switch strings.ToLower(v) {
	case "", "yes", "ask":
		return HostKeyStrict, nil
	case "accept-new", "no", "off":
		return HostKeyAcceptNew, nil
	}
	return "", fmt.Errorf("StrictHostKeyChecking %q: want yes, accept-new or no", v)
}

func normalizePolicy(p string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(p)) {
	case "strict", "yes", "true":
		return HostKeyStrict, nil
	case "accept-new", "accept_new":
		return HostKeyAcceptNew, nil
	}
	return "", fmt.Errorf("host key policy %q: want %q or %q", p, HostKeyStrict, HostKeyAcceptNew)
}

// jumpSpec is one ProxyJump element before ssh_config lookup.
type jumpSpec struct {
	user, host string
	port       int
}

// parseProxyJump parses "[user@]host[:port][,...]" including ssh:// URIs
// and bracketed IPv6 addresses. "none" means no jump.
func parseProxyJump(s string) ([]jumpSpec, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "none") {
		return nil, nil
	}
	var out []jumpSpec
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimPrefix(strings.TrimSpace(part), "ssh://")
		if part == "" {
			return nil, fmt.Errorf("ProxyJump %q: empty hop", s)
		}
		var j jumpSpec
		if i := strings.LastIndex(part, "@"); i >= 0 {
			j.user, part = part[:i], part[i+1:]
		}
		hostPart, portPart := part, ""
		switch {
		case strings.HasPrefix(part, "["):
			h, p, err := net.SplitHostPort(part)
			if err != nil {
				h, p = strings.Trim(part, "[]"), ""
			}
			hostPart, portPart = h, p
		case strings.Count(part, ":") == 1:
			i := strings.IndexByte(part, ':')
			hostPart, portPart = part[:i], part[i+1:]
		}
		if hostPart == "" {
			return nil, fmt.Errorf("ProxyJump %q: hop without a host", s)
		}
		j.host = hostPart
		if portPart != "" {
			n, err := strconv.Atoi(portPart)
			if err != nil || n <= 0 || n > 65535 {
				return nil, fmt.Errorf("ProxyJump %q: bad port %q", s, portPart)
			}
			j.port = n
		}
		out = append(out, j)
	}
	return out, nil
}

// localIdentity is who runs pgtune: the default login user and where ~ is.
type localIdentity struct {
	user, home string
}

func currentIdentity() localIdentity {
	id := localIdentity{user: os.Getenv("USER"), home: os.Getenv("HOME")}
	if u, err := user.Current(); err == nil {
		if id.user == "" {
			id.user = u.Username
		}
		if id.home == "" {
			id.home = u.HomeDir
		}
	}
	return id
}

// defaultKeyFiles are the identities OpenSSH tries when none is configured.
var defaultKeyFiles = []string{"id_ed25519", "id_ecdsa", "id_rsa"}

// sshName is the name Ansible gives ssh(1), the one ssh_config's Host and
// Match lines, %n and HostName's %h see: the inventory's address when it
// sets ansible_host (or ssh_host), else the inventory name. Looking the
// host up under any other name could apply a block Ansible does not, or
// miss the one (a ProxyJump) it does.
func sshName(cfg SSHConfig) string {
	if cfg.Address != "" {
		return cfg.Address
	}
	return cfg.Name
}

// resolve turns SSHConfig plus its ssh_config file into a route. Explicit
// fields win; ssh_config fills what they leave empty; defaults come last.
// It touches no network, so it is tested on its own.
func resolve(cfg SSHConfig, local localIdentity, agentAvailable bool) (*route, error) {
	return resolveWith(cfg, local, agentAvailable, nil)
}

// resolveWith is resolve with runExec deciding Match exec lines (nil:
// they run, as for a connection).
func resolveWith(cfg SSHConfig, local localIdentity, agentAvailable bool, runExec func(string) (bool, error)) (*route, error) {
	if cfg.Name == "" && cfg.Address == "" {
		return nil, errors.New("ssh: no host name or address")
	}
	sc, err := loadSSHConfigs(expandHome(cfg.ConfigFile, local.home), local.home)
	if err != nil {
		return nil, err
	}
	return resolveFrom(cfg, sc, local, agentAvailable, runExec)
}

// noSSHConfig is no ssh_config file at all: what the inventory alone gives.
func noSSHConfig(home string) *sshConfigFile {
	return &sshConfigFile{path: "(none)", home: home, hosts: map[string]*hostOptions{}, presets: map[string]configPresets{}}
}

// resolveFrom is resolveWith over the ssh_config files sc.
func resolveFrom(cfg SSHConfig, sc *sshConfigFile, local localIdentity, agentAvailable bool, runExec func(string) (bool, error)) (*route, error) {
	var err error
	// Inventories spell paths the way ssh(1) users do: ~/.ssh/…
	cfg.PrivateKeyFile = expandHome(cfg.PrivateKeyFile, local.home)
	cfg.KnownHostsFile = expandHome(cfg.KnownHostsFile, local.home)
	sc.local = local
	if runExec != nil {
		sc.runExec = runExec
	}
	alias := sshName(cfg)
	if err := sc.evaluate(alias, configPresets{user: cfg.User, port: cfg.Port}); err != nil {
		return nil, err
	}
	r := &route{timeout: cfg.ConnectTimeout}
	if r.timeout <= 0 {
		r.timeout = 10 * time.Second
		if v := sc.get(alias, "ConnectTimeout"); v != "" {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				r.timeout = time.Duration(n) * time.Second
			}
		}
	}

	policy := ""
	if cfg.HostKeyPolicy != "" {
		if policy, err = normalizePolicy(cfg.HostKeyPolicy); err != nil {
			return nil, err
		}
	}
	var explicitKeys []string
	if cfg.PrivateKeyFile != "" {
		explicitKeys = []string{cfg.PrivateKeyFile}
	}
	var explicitKnown []string
	if cfg.KnownHostsFile != "" {
		explicitKnown = []string{cfg.KnownHostsFile}
	}

	target, err := resolveEndpoint(sc, alias, endpointOverrides{
		port: cfg.Port, user: cfg.User,
		keys: explicitKeys, knownHosts: explicitKnown, policy: policy,
	}, local, agentAvailable)
	if err != nil {
		return nil, err
	}
	target.name = cfg.Name
	if target.name == "" {
		target.name = alias
	}
	r.target = target

	// Options given on the command line win over the ssh_config's: ssh(1)
	// takes the first ProxyJump or ProxyCommand it obtains.
	if cfg.ProxyCommand != "" {
		if target.proxyCommand, err = expandProxyCommand(cfg.ProxyCommand, target, alias); err != nil {
			return nil, err
		}
	} else if cfg.ProxyJump != "" {
		target.proxyCommand = ""
	}
	jumpStr := cfg.ProxyJump
	if jumpStr == "" && cfg.ProxyCommand == "" {
		jumpStr = sc.get(alias, "ProxyJump")
	}
	specs, err := parseProxyJump(jumpStr)
	if err != nil {
		return nil, err
	}
	if len(specs) > 0 && target.proxyCommand != "" {
		return nil, fmt.Errorf("ssh_config %s: Host %s: both ProxyCommand and ProxyJump are set; keep one", sc.path, alias)
	}
	for i, j := range specs {
		// A hop is looked up in the same ssh_config by its alias, as
		// OpenSSH does; the inventory's key and known_hosts apply to it
		// too, since they usually belong to the same fleet. Its host-key
		// policy does not: ssh(1) runs a ProxyJump hop as `ssh -l -p -F
		// -W host`, without the command line's -o StrictHostKeyChecking
		// (measured, OpenSSH 9.2; ssh(1) -J: "configuration directives
		// supplied on the command-line generally apply to the destination
		// host and not any specified jump hosts"). So, as for Ansible's
		// ssh, an inventory's accept-new (or ansible.cfg's
		// host_key_checking = False) never makes a bastion trusted on
		// first use: the hop's own ssh_config block decides, else strict.
		// An inventory's strict still binds the hops (as before): it only
		// ever tightens.
		hopPolicy := ""
		if policy == HostKeyStrict {
			hopPolicy = HostKeyStrict
		}
		hop, err := resolveEndpoint(sc, j.host, endpointOverrides{
			port: j.port, user: j.user, extraKeys: explicitKeys,
			knownHosts: explicitKnown, policy: hopPolicy,
		}, local, agentAvailable)
		if err != nil {
			return nil, fmt.Errorf("jump host %s: %w", j.host, err)
		}
		hop.name = j.host
		hop.jump = true
		if err := checkHopProxy(sc, j.host, hop, i); err != nil {
			return nil, err
		}
		r.jumps = append(r.jumps, hop)
	}
	return r, nil
}

type endpointOverrides struct {
	port       int
	user       string
	keys       []string // replace ssh_config IdentityFile order: first
	extraKeys  []string // appended after ssh_config IdentityFile
	knownHosts []string
	policy     string
}

func resolveEndpoint(sc *sshConfigFile, alias string, o endpointOverrides, local localIdentity, agentAvailable bool) (*endpoint, error) {
	if err := sc.evaluate(alias, configPresets{user: o.user, port: o.port}); err != nil {
		return nil, err
	}
	e := &endpoint{host: alias, port: o.port, user: o.user}
	if hn := sc.get(alias, "HostName"); hn != "" {
		e.host = strings.ReplaceAll(hn, "%h", alias)
	}
	if e.port == 0 {
		if p, file := sc.lookup(alias, "Port"); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n <= 0 || n > 65535 {
				return nil, fmt.Errorf("ssh_config %s: Host %s: bad Port %q", file, alias, p)
			}
			e.port = n
		} else {
			e.port = 22
		}
	}
	if e.port <= 0 || e.port > 65535 {
		return nil, fmt.Errorf("bad port %d", e.port)
	}
	if e.user == "" {
		e.user = sc.get(alias, "User")
	}
	if e.user == "" {
		e.user = local.user
	}
	if e.user == "" {
		return nil, errors.New("no login user (set ssh_user)")
	}

	keys := append([]string(nil), o.keys...)
	for _, k := range sc.getAll(alias, "IdentityFile") {
		keys = append(keys, expandPath(k, e, local.user, local.home))
	}
	keys = append(keys, o.extraKeys...)
	e.agent = agentAvailable && !strings.EqualFold(sc.get(alias, "IdentitiesOnly"), "yes") &&
		!strings.EqualFold(sc.get(alias, "IdentityAgent"), "none")
	if len(keys) == 0 {
		// OpenSSH's defaults, only those that exist.
		for _, k := range defaultKeyFiles {
			p := filepath.Join(local.home, ".ssh", k)
			if _, err := os.Stat(p); err == nil {
				keys = append(keys, p)
			}
		}
	}
	e.keyFiles = dedup(keys)

	e.knownHosts = o.knownHosts
	if len(e.knownHosts) == 0 {
		v := sc.get(alias, "UserKnownHostsFile")
		e.knownHosts = knownHostsFiles(v, e, local)
		if v == "" {
			e.knownHosts = []string{filepath.Join(local.home, ".ssh", "known_hosts")}
		}
	}
	e.globalKnownHosts = knownHostsFiles(sc.get(alias, "GlobalKnownHostsFile"), e, local)
	e.hostKeyAlias = sc.get(alias, "HostKeyAlias")
	if err := sc.checkUnsupported(alias); err != nil {
		return nil, err
	}
	if pc := sc.get(alias, "ProxyCommand"); pc != "" && !strings.EqualFold(pc, "none") {
		cmd, err := expandProxyCommand(pc, e, alias)
		if err != nil {
			return nil, fmt.Errorf("ssh_config %s: Host %s: %w", sc.path, alias, err)
		}
		e.proxyCommand = cmd
	}

	e.policy = o.policy
	if e.policy == "" {
		v, file := sc.lookup(alias, "StrictHostKeyChecking")
		p, err := policyFromStrict(v)
		if err != nil {
			return nil, fmt.Errorf("ssh_config %s: Host %s: %w", file, alias, err)
		}
		e.policy = p
	}
	return e, nil
}

func dedup(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0]
	for _, s := range in {
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}
