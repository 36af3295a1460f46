package transport

import (
	"fmt"
	"os"
	"strings"
)

// DescribeRoute says how cfg reaches its host, as a connection would go:
// the ssh_config files (the named one, ~/.ssh/config, the system file)
// resolved as DialSSH resolves them, without touching the network and
// without running a Match exec command (taken as not matching, and said).
// For -vvv: "ssh USER@HOST port N, key …, jump host …, host key from …
// (policy)". A proxy command is named, never shown: it may carry a
// password (sshpass -p).
func DescribeRoute(cfg SSHConfig) (string, error) {
	skipped := false
	r, err := resolveWith(cfg, currentIdentity(), os.Getenv("SSH_AUTH_SOCK") != "", func(string) (bool, error) {
		skipped = true
		return false, nil
	})
	if err != nil {
		return "", err
	}
	d := r.describe()
	if skipped {
		d += ", Match exec not run here (taken as not matching; the connection runs it)"
	}
	return d, nil
}

// ResolvedRoute is DescribeRoute for `pgtune inventory list`, with
// fromConfig saying whether an ssh_config changed anything from what the
// inventory alone gives (another HostName, port, user, key, jump host,
// proxy command, known_hosts or policy, or a Match exec it could not run):
// only then is the route worth showing beside the inventory's fields.
// A route that does not resolve is err, the reason the connection will
// fail with; fromConfig then says whether the ssh_config is the reason.
func ResolvedRoute(cfg SSHConfig) (desc string, fromConfig bool, err error) {
	desc, err = DescribeRoute(cfg)
	local := currentIdentity()
	base, baseErr := resolveFrom(cfg, noSSHConfig(local.home), local, os.Getenv("SSH_AUTH_SOCK") != "", nil)
	switch {
	case err != nil:
		return "", baseErr == nil || baseErr.Error() != err.Error(), err
	case baseErr != nil:
		return desc, true, nil
	}
	return desc, desc != base.describe(), nil
}

func (r *route) describe() string {
	t := r.target
	parts := []string{fmt.Sprintf("ssh %s@%s port %d", t.user, t.host, t.port), "key " + t.keysText()}
	switch {
	case len(r.jumps) > 0:
		hops := make([]string, len(r.jumps))
		for i, j := range r.jumps {
			hops[i] = fmt.Sprintf("%s@%s port %d", j.user, j.host, j.port)
			if j.policy != t.policy {
				// The inventory's accept-new is the target's alone.
				hops[i] += fmt.Sprintf(" (its host key %s)", j.policy)
			}
		}
		parts = append(parts, "jump host "+strings.Join(hops, ", then "))
	case t.proxyCommand != "":
		parts = append(parts, "a proxy command (not shown: it may carry a secret)")
	default:
		parts = append(parts, "no jump host")
	}
	known := "no known_hosts file (UserKnownHostsFile none)"
	if len(t.knownHosts) > 0 {
		known = "host key from " + strings.Join(t.knownHosts, ", ")
	}
	if t.hostKeyAlias != "" {
		known += " as " + t.hostKeyAlias
	}
	return strings.Join(append(parts, fmt.Sprintf("%s (%s)", known, t.policy)), ", ")
}

func (e *endpoint) keysText() string {
	keys := strings.Join(e.keyFiles, ", ")
	switch {
	case keys == "" && e.agent:
		return "(the SSH agent's)"
	case keys == "":
		return "(none: no key file, no SSH agent)"
	case e.agent:
		return keys + " and the SSH agent's"
	}
	return keys
}

// RouteHost is the name a connection to cfg dials, as DescribeRoute
// resolves it (the ssh_config's HostName for an alias, no Match exec run),
// and relayed says whether it is reached through a jump host or a proxy
// command: then the name may only resolve on the far side, not here.
func RouteHost(cfg SSHConfig) (host string, relayed bool, err error) {
	r, err := resolveWith(cfg, currentIdentity(), os.Getenv("SSH_AUTH_SOCK") != "", func(string) (bool, error) {
		return false, nil
	})
	if err != nil {
		return "", false, err
	}
	return r.target.host, len(r.jumps) > 0 || r.target.proxyCommand != "", nil
}
