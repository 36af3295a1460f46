package engine

import (
	"context"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
)

// Dial opens a host's transport from its inventory connection settings.
func Dial(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
	if err := h.ConnError(); err != nil {
		return nil, err
	}
	c := h.Conn
	if c.Connection == "local" {
		return transport.NewLocalBecome(c.BecomePassword), nil
	}
	return transport.DialSSH(ctx, SSHConfigOf(h))
}

// SSHConfigOf is how Dial reaches h over SSH (also what -vvv describes).
func SSHConfigOf(h *inventory.Host) transport.SSHConfig {
	c := h.Conn
	addr := c.Address
	if addr == h.Name {
		// No ssh_host given: let the ssh_config's HostName (the named
		// file's, else ~/.ssh/config's or /etc/ssh/ssh_config's) decide,
		// as ssh(1) would.
		addr = ""
	}
	return transport.SSHConfig{
		Name:           h.Name,
		Address:        addr,
		Port:           c.Port,
		User:           c.User,
		PrivateKeyFile: c.PrivateKeyFile,
		KnownHostsFile: c.KnownHostsFile,
		HostKeyPolicy:  c.HostKeyChecking,
		ConfigFile:     c.ConfigFile,
		ProxyJump:      c.ProxyJump,
		ProxyCommand:   c.ProxyCommand,
		Password:       c.Password,
		BecomePassword: c.BecomePassword,
		// Off: its start is now bounded (a sudo streaming output forever,
		// a shell never ready), but measured against one sudo per step it
		// saved SSH round trips and no host CPU, and it is one more
		// protocol spoken with a hostile host. transport keeps it tested.
		PrivilegedShell: false,
	}
}
