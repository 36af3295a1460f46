package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/pgtune/pgtune/internal/testhost"
)

// jumpAndTarget starts a bastion and a target sshd; the target's client
// key is authorised on the bastion too, as one fleet key usually is.
func jumpAndTarget(t *testing.T) (jump, target *testhost.SSHServer) {
	jump, target = testhost.SSHD(t), testhost.SSHD(t)
	pub, err := os.ReadFile(target.KeyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(jump.Dir, "authorized_keys"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(pub); err != nil {
		t.Fatal(err)
	}
	return jump, target
}

// otherKeyLine is a known_hosts line recording another key for srv.
func otherKeyLine(t *testing.T, srv *testhost.SSHServer) string {
	_, other := newKey(t, keyEd25519)
	return fmt.Sprintf("[127.0.0.1]:%d %s", srv.Port, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(other.PublicKey()))))
}

// TestIntegrationJumpHostRefusalNamesTheHop: behind a bastion, a refusal
// says whether the bastion or the target refused (real sshd for both),
// for a ProxyJump from the inventory and from an ssh_config. Before, the
// target's refusal had no mark of the route, and the bastion's read "via
// jump host X: host key for … CHANGED".
func TestIntegrationJumpHostRefusalNamesTheHop(t *testing.T) {
	jump, target := jumpAndTarget(t)
	jp, tp := itoa(jump.Port), itoa(target.Port)
	conf := writeTemp(t, "ssh_config", fmt.Sprintf("Host db\n  HostName 127.0.0.1\n  Port %d\n  User root\n  ProxyJump bastion\n"+
		"Host bastion\n  HostName 127.0.0.1\n  Port %d\n  User root\n", target.Port, jump.Port))
	inventoryJump := func(known string) SSHConfig {
		cfg := sshdConfig(target)
		cfg.Name, cfg.KnownHostsFile, cfg.ProxyJump = "db", known, "root@127.0.0.1:"+jp
		return cfg
	}
	configJump := func(known string) SSHConfig {
		return SSHConfig{Name: "db", ConfigFile: conf, PrivateKeyFile: target.KeyFile, KnownHostsFile: known, ConnectTimeout: 10 * time.Second}
	}
	for _, tc := range []struct {
		name    string
		cfg     SSHConfig
		wantErr error
		prefix  string
	}{
		{"target key changed", inventoryJump(writeKnownHosts(t, jump.HostKeyLine, otherKeyLine(t, target))), ErrChangedHostKey,
			"db (via jump host 127.0.0.1): host key for 127.0.0.1:" + tp + " CHANGED"},
		{"bastion key changed", inventoryJump(writeKnownHosts(t, otherKeyLine(t, jump), target.HostKeyLine)), ErrChangedHostKey,
			"jump host 127.0.0.1 (on the way to db): host key for 127.0.0.1:" + jp + " CHANGED"},
		{"target unknown", inventoryJump(writeKnownHosts(t, jump.HostKeyLine)), ErrUnknownHostKey,
			"db (via jump host 127.0.0.1): host key for 127.0.0.1:" + tp + " is not in "},
		{"bastion unknown", inventoryJump(writeKnownHosts(t, target.HostKeyLine)), ErrUnknownHostKey,
			"jump host 127.0.0.1 (on the way to db): host key for 127.0.0.1:" + jp + " is not in "},
		{"target refuses the login", func() SSHConfig {
			cfg := inventoryJump(writeKnownHosts(t, jump.HostKeyLine, target.HostKeyLine))
			cfg.PrivateKeyFile = jump.KeyFile // authorised on the bastion only
			return cfg
		}(), ErrAuthFailed, "db (via jump host 127.0.0.1): authentication failed for user root at 127.0.0.1:" + tp},
		{"bastion refuses the login", func() SSHConfig {
			cfg := inventoryJump(writeKnownHosts(t, jump.HostKeyLine, target.HostKeyLine))
			cfg.ProxyJump = "nosuchuser@127.0.0.1:" + jp
			return cfg
		}(), ErrAuthFailed, "jump host 127.0.0.1 (on the way to db): authentication failed for user nosuchuser at 127.0.0.1:" + jp},
		{"ssh_config ProxyJump, target key changed", configJump(writeKnownHosts(t, jump.HostKeyLine, otherKeyLine(t, target))), ErrChangedHostKey,
			"db (via jump host bastion): host key for 127.0.0.1:" + tp + " CHANGED"},
		{"ssh_config ProxyJump, bastion key changed", configJump(writeKnownHosts(t, otherKeyLine(t, jump), target.HostKeyLine)), ErrChangedHostKey,
			"jump host bastion (on the way to db): host key for 127.0.0.1:" + jp + " CHANGED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DialSSH(context.Background(), tc.cfg)
			if err == nil {
				c.Close()
				t.Fatal("DialSSH succeeded, want a refusal")
			}
			if !errors.Is(err, tc.wantErr) || !strings.HasPrefix(err.Error(), tc.prefix) {
				t.Errorf("err = %v\nwant errors.Is %v, starting %q", err, tc.wantErr, tc.prefix)
			}
		})
	}
}
