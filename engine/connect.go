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
	addr := c.Address
	if addr == h.Name {
		// No ssh_host given: let the ssh_config's HostName (the named
		// file's, else ~/.ssh/config's or /etc/ssh/ssh_config's) decide,
		// as ssh(1) would.
		addr = ""
	}
	return transport.DialSSH(ctx, transport.SSHConfig{
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
		// Off until its start is bounded: a host whose sudo streams
		// output forever (the hostile-hosts test's) hung the shell's start
		// past every timeout. transport keeps it for its own tests.
		PrivilegedShell: false,
	})
}
