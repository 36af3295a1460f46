package main

import (
	"fmt"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
)

// connectionLine says how a host is reached, for -vvv: user, address,
// port, key, jump host and where its host key is checked, with the
// ssh_config files resolved as the connection resolves them (before, the
// inventory's values alone: "no jump host, port 22" for a host an
// ssh_config sends through a bastion to another port).
func connectionLine(h *inventory.Host) string {
	c := h.Conn
	if c.Connection == "local" {
		line := "local connection"
		if c.Become {
			line += ", " + becomeText(c)
		}
		return line
	}
	// As the connection will go: the ssh_config files resolved.
	route, routeErr := transport.DescribeRoute(engine.SSHConfigOf(h))
	if routeErr == nil {
		if c.ConfigFile != "" {
			route += ", ssh_config " + c.ConfigFile
		}
		if c.Become {
			route += ", " + becomeText(c)
		}
		return route
	}
	// Not resolvable (the connection will say why): what the inventory says.
	or := func(v, dflt string) string {
		if v == "" {
			return dflt
		}
		return v
	}
	addr := or(c.Address, h.Name)
	port := "22 (default)"
	if c.Port != 0 {
		port = fmt.Sprint(c.Port)
	} else if c.ConfigFile != "" {
		port = "from ssh_config"
	}
	parts := []string{
		fmt.Sprintf("ssh %s@%s port %s", or(c.User, "(current user)"), addr, port),
		"key " + or(c.PrivateKeyFile, "(SSH agent and default keys)"),
	}
	switch {
	case c.ProxyJump != "":
		parts = append(parts, "jump host "+c.ProxyJump)
	case c.ProxyCommand != "":
		parts = append(parts, "a proxy command (not shown: it may carry a secret)")
	default:
		parts = append(parts, "no jump host"+map[bool]string{true: " (unless ssh_config sets one)"}[c.ConfigFile != ""])
	}
	checking := or(c.HostKeyChecking, "strict")
	parts = append(parts, fmt.Sprintf("host key from %s (%s)", or(c.KnownHostsFile, "~/.ssh/known_hosts"), checking))
	if c.ConfigFile != "" {
		parts = append(parts, "ssh_config "+c.ConfigFile)
	}
	if c.Become {
		parts = append(parts, becomeText(c))
	}
	// The connection will fail the same way: say why here too.
	parts = append(parts, "not resolved: "+routeErr.Error())
	return strings.Join(parts, ", ")
}

// showConnections prints, with -vvv, how every targeted host is reached.
func (a *App) showConnections(o *options, hosts []*inventory.Host) {
	if o.verbose < 3 {
		return
	}
	for _, h := range hosts {
		fmt.Fprintf(a.Stderr, "pgtune: %s: %s\n", safeText(h.Name), safeText(connectionLine(h)))
	}
}

// becomeText says how privileged steps run: sudo -S answered with the
// become password when there is one, else sudo -n.
func becomeText(c inventory.Conn) string {
	if c.BecomePassword != "" {
		return "become (sudo -S with the become password)"
	}
	return "become (sudo -n)"
}
