package engine

import (
	"context"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
)

// Dial opens a host's transport from its inventory connection settings.
func Dial(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
	c := h.Conn
	if c.Connection == "local" {
		return transport.NewLocal(), nil
	}
	return transport.DialSSH(ctx, transport.SSHConfig{
		Name:           h.Name,
		Address:        c.Address,
		Port:           c.Port,
		User:           c.User,
		PrivateKeyFile: c.PrivateKeyFile,
		KnownHostsFile: c.KnownHostsFile,
		HostKeyPolicy:  c.HostKeyChecking,
		ConfigFile:     c.ConfigFile,
	})
}
