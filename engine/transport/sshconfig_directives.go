package transport

import (
	"fmt"
	"strings"
)

// refusedDirective is an ssh_config keyword that would change where pgtune
// connects, the route it takes or how the host key is verified, and that
// pgtune does not implement. Ignoring it would connect somewhere (or trust
// something) other than what ssh(1) would, so a host using it fails instead.
type refusedDirective struct {
	key     string
	allowed []string // values that mean "off" (case-insensitive); "+" allows a "+list" value
	why     string
}

// refusedDirectives is the list the README documents. Every other keyword
// pgtune does not implement either does not touch the destination, the route
// or the host key (forwarding, multiplexing, logging, ciphers), or only adds
// to OpenSSH defaults.
var refusedDirectives = []refusedDirective{
	{"CanonicalizeHostname", []string{"no"}, "rewrites the host name before connecting"},
	{"AddressFamily", []string{"any"}, "restricts the address family"},
	{"BindAddress", nil, "changes the local address connections come from"},
	{"BindInterface", nil, "changes the local interface connections come from"},
	{"ProxyUseFdpass", []string{"no"}, "hands a descriptor over from the ProxyCommand"},
	{"KnownHostsCommand", []string{"none"}, "obtains host keys from a command"},
	{"HostKeyAlgorithms", []string{"+"}, "restricts the accepted host key types (only a +list, which adds to the defaults, is accepted)"},
	{"CheckHostIP", []string{"no"}, "checks the host's IP address in known_hosts too"},
	{"VerifyHostKeyDNS", []string{"no"}, "trusts host keys from DNS SSHFP records"},
	{"RevokedHostKeys", []string{"none"}, "refuses revoked host keys"},
	{"NoHostAuthenticationForLocalhost", []string{"no"}, "skips host key checks for localhost"},
	{"PermitLocalCommand", []string{"no"}, "runs LocalCommand on this machine after connecting"},
}

// checkUnsupported fails when the ssh_config gives alias a directive pgtune
// refuses.
func (f *sshConfigFile) checkUnsupported(alias string) error {
	if f == nil {
		return nil
	}
	for _, d := range refusedDirectives {
		v, file := f.lookup(alias, d.key)
		if v == "" || d.allows(v) {
			continue
		}
		return fmt.Errorf("ssh_config %s: Host %s: %s %s is not supported by pgtune (it %s); remove it for this host",
			file, alias, d.key, v, d.why)
	}
	if v, file := f.lookup(alias, "IdentityAgent"); v != "" && !strings.EqualFold(v, "none") && v != "SSH_AUTH_SOCK" && v != "$SSH_AUTH_SOCK" {
		return fmt.Errorf("ssh_config %s: Host %s: IdentityAgent %s is not supported by pgtune (only none or SSH_AUTH_SOCK)", file, alias, v)
	}
	return nil
}

func (d refusedDirective) allows(v string) bool {
	for _, a := range d.allowed {
		if a == "+" && strings.HasPrefix(v, "+") || strings.EqualFold(v, a) {
			return true
		}
	}
	return false
}

// knownHostsFiles splits a UserKnownHostsFile/GlobalKnownHostsFile value
// into expanded paths; "none" names no file.
func knownHostsFiles(v string, e *endpoint, local localIdentity) []string {
	var out []string
	for _, f := range splitWords(v) {
		if strings.EqualFold(f, "none") {
			continue
		}
		out = append(out, expandPath(f, e, local.user, local.home))
	}
	return out
}

// expandProxyCommand expands the tokens ssh(1) accepts in ProxyCommand:
// %h (HostName), %p, %r, %n (the alias as given) and %%. Any other token
// is an error rather than passed through literally.
func expandProxyCommand(cmd string, e *endpoint, alias string) (string, error) {
	var unsafe error
	out, ok, bad := expandTokens(cmd, safeNameTokens(func(c byte) (string, bool) {
		if c == 'n' {
			return alias, true
		}
		return endpointToken(c, e)
	}, &unsafe), false)
	switch {
	case ok && unsafe != nil:
		return "", fmt.Errorf("ProxyCommand %q: %w", cmd, unsafe)
	case ok:
		return out, nil
	case bad == 0:
		return "", fmt.Errorf("ProxyCommand %q: lone %% at the end", cmd)
	}
	return "", fmt.Errorf("ProxyCommand %q: token %%%c is not supported (use %%h %%p %%r %%n %%%%)", cmd, bad)
}

// checkHopProxy applies ssh(1)'s rules for the proxies of jump host i: the
// first hop is reached by its own ProxyCommand if it has one; pgtune does
// not follow a hop's own ProxyJump, and later hops are always reached
// through the previous one, so a proxy set for them is refused rather than
// dropped.
func checkHopProxy(sc *sshConfigFile, alias string, hop *endpoint, i int) error {
	pj := sc.get(alias, "ProxyJump")
	if pj != "" && !strings.EqualFold(pj, "none") {
		return fmt.Errorf("ssh_config %s: jump host %s: its own ProxyJump %s is not supported by pgtune; list every hop in order in the target's ProxyJump", sc.path, alias, pj)
	}
	if i > 0 && hop.proxyCommand != "" {
		return fmt.Errorf("ssh_config %s: jump host %s: ProxyCommand is not supported on a jump host after the first one", sc.path, alias)
	}
	return nil
}
