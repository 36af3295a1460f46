package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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

// TestIntegrationJumpHostKeepsItsOwnPolicy: the inventory's accept-new is
// the target's, as `ssh -o StrictHostKeyChecking=accept-new -J …` is
// (checked here against the real ssh(1)): an unknown bastion is refused
// and nothing is recorded for it. Its own ssh_config block can make it
// accept-new, as for ssh(1). Before, the inventory's accept-new recorded
// any bastion key on first contact.
func TestIntegrationJumpHostKeepsItsOwnPolicy(t *testing.T) {
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		t.Fatal("ssh client not installed (apt-get install -y openssh-client)")
	}
	jump, target := jumpAndTarget(t)
	jp := itoa(jump.Port)
	recordsJump := func(known string) bool {
		b, err := os.ReadFile(known)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(b), "[127.0.0.1]:"+jp+" ")
	}

	t.Run("inventory accept-new leaves the bastion strict", func(t *testing.T) {
		known := writeKnownHosts(t, target.HostKeyLine)
		cfg := sshdConfig(target)
		cfg.Name, cfg.KnownHostsFile, cfg.HostKeyPolicy, cfg.ProxyJump = "db", known, HostKeyAcceptNew, "root@127.0.0.1:"+jp
		c, err := DialSSH(context.Background(), cfg)
		if err == nil {
			c.Close()
			t.Fatal("DialSSH succeeded through an unknown bastion under the target's accept-new")
		}
		if !errors.Is(err, ErrUnknownHostKey) || !strings.Contains(err.Error(), "jump host 127.0.0.1 (on the way to db)") ||
			!strings.Contains(err.Error(), "ssh_host_key_checking is for the target only") {
			t.Errorf("err = %v", err)
		}
		if recordsJump(known) {
			t.Error("the bastion's key was recorded")
		}
	})
	t.Run("ssh(1) does the same", func(t *testing.T) {
		known := writeKnownHosts(t, target.HostKeyLine)
		conf := writeTemp(t, "ssh_config", fmt.Sprintf("Host *\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile /dev/null\n  BatchMode yes\n", target.KeyFile, known))
		out, err := exec.Command(sshBin, "-F", conf, "-o", "StrictHostKeyChecking=accept-new", "-J", "root@127.0.0.1:"+jp,
			"-p", itoa(target.Port), "root@127.0.0.1", "true").CombinedOutput()
		if err == nil || recordsJump(known) {
			t.Errorf("ssh(1) -o StrictHostKeyChecking=accept-new -J: err %v, bastion recorded %v: %s", err, recordsJump(known), out)
		}
	})
	t.Run("the bastion's own ssh_config block may say accept-new", func(t *testing.T) {
		known := writeKnownHosts(t, target.HostKeyLine)
		conf := writeTemp(t, "ssh_config", fmt.Sprintf("Host bastion\n  HostName 127.0.0.1\n  Port %d\n  User root\n  StrictHostKeyChecking accept-new\n", jump.Port))
		cfg := sshdConfig(target)
		cfg.Name, cfg.KnownHostsFile, cfg.ConfigFile, cfg.ProxyJump = "db", known, conf, "bastion"
		c := dial(t, cfg)
		c.Close()
		if !recordsJump(known) {
			t.Error("the bastion's key was not recorded under its own accept-new")
		}
	})
}
