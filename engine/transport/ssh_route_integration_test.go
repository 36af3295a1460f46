package transport

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgtune/pgtune/internal/testhost"
)

// These run against real OpenSSH sshd (and the real ssh client as a
// ProxyCommand) on 127.0.0.1.

// knownAs is srv's known_hosts line recorded under another name.
func knownAs(t *testing.T, srv *testhost.SSHServer, name string) string {
	_, rest, _ := strings.Cut(srv.HostKeyLine, " ")
	return writeKnownHosts(t, name+" "+rest)
}

func TestIntegrationSSHDProxyCommand(t *testing.T) {
	srv := testhost.SSHD(t)
	known := knownAs(t, srv, fmt.Sprintf("[proxied.invalid]:%d", srv.Port))

	t.Run("helper proxy", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "proxy.log")
		conf := writeTemp(t, "ssh_config", fmt.Sprintf("Host db1\n  HostName proxied.invalid\n  Port %d\n  User root\n  %s\n", srv.Port, proxyCommand(t, log)))
		before := acceptedLogins(srv)
		c := dial(t, SSHConfig{Name: "db1", ConfigFile: conf, PrivateKeyFile: srv.KeyFile, KnownHostsFile: known})
		res, err := c.Run(context.Background(), Command{Args: []string{"id", "-un"}})
		if err != nil || string(res.Stdout) != "root\n" {
			t.Fatalf("id -un = %q, %v", res.Stdout, err)
		}
		if b, _ := os.ReadFile(log); !strings.Contains(string(b), fmt.Sprintf("host=proxied.invalid port=%d user=root alias=db1", srv.Port)) {
			t.Fatalf("proxy log %q", b)
		}
		if n := acceptedLogins(srv) - before; n != 1 {
			t.Errorf("%d logins, want 1", n)
		}
	})
	t.Run("ssh -W through a bastion", func(t *testing.T) {
		ssh, err := exec.LookPath("ssh")
		if err != nil {
			t.Fatal("ssh client not installed (apt-get install -y openssh-client)")
		}
		bastion := testhost.SSHD(t)
		conf := writeTemp(t, "ssh_config", fmt.Sprintf("Host db1\n  HostName 127.0.0.1\n  Port %d\n  User root\n  HostKeyAlias proxied-db1\n"+
			"  ProxyCommand %s -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=%s -i %s -p %d -W %%h:%%p root@127.0.0.1\n",
			srv.Port, ssh, bastion.KnownHostsFile, bastion.KeyFile, bastion.Port))
		before, beforeB := acceptedLogins(srv), acceptedLogins(bastion)
		c := dial(t, SSHConfig{Name: "db1", ConfigFile: conf, PrivateKeyFile: srv.KeyFile, KnownHostsFile: knownAs(t, srv, "proxied-db1")})
		res, err := c.Run(context.Background(), Command{Args: []string{"echo", "via bastion"}})
		if err != nil || string(res.Stdout) != "via bastion\n" {
			t.Fatalf("echo = %q, %v", res.Stdout, err)
		}
		if n, nb := acceptedLogins(srv)-before, acceptedLogins(bastion)-beforeB; n != 1 || nb != 1 {
			t.Errorf("logins: target %d, bastion %d; want 1, 1", n, nb)
		}
		c.Close()
		if n := bastion.WaitSessions(t, 0, 10*time.Second); n != 0 {
			t.Errorf("bastion still serves %d connections after Close", n)
		}
	})
}

func TestIntegrationSSHDSharedJumpHost(t *testing.T) {
	jump, target := testhost.SSHD(t), testhost.SSHD(t)
	known := writeKnownHosts(t, jump.HostKeyLine, target.HostKeyLine)
	cfg := SSHConfig{Name: "db", Address: "127.0.0.1", Port: target.Port, User: "root", PrivateKeyFile: target.KeyFile,
		KnownHostsFile: known, ConnectTimeout: 10 * time.Second, ProxyJump: fmt.Sprintf("root@127.0.0.1:%d", jump.Port)}
	// The inventory key is offered to the jump host too; authorise it there.
	pub, err := os.ReadFile(target.KeyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(jump.Dir, "authorized_keys"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(pub)
	f.Close()

	const n = 10
	conns := make([]*SSH, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := DialSSH(context.Background(), cfg)
			if err != nil {
				t.Error(err)
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	if t.Failed() {
		return
	}
	for _, c := range conns {
		res, err := c.Run(context.Background(), Command{Args: []string{"true"}})
		if err != nil {
			t.Fatalf("%v %v", res, err)
		}
	}
	if j, tg := acceptedLogins(jump), acceptedLogins(target); j != 1 || tg != n {
		t.Errorf("logins: jump %d, target %d; want 1, %d", j, tg, n)
	}
	if s := jump.Sessions(t); s != 1 {
		t.Errorf("jump sshd serves %d connections, want 1", s)
	}
	for _, c := range conns {
		c.Close()
	}
	if s := jump.WaitSessions(t, 0, 10*time.Second); s != 0 {
		t.Errorf("jump sshd still serves %d connections after the last target closed", s)
	}
	if s := target.WaitSessions(t, 0, 10*time.Second); s != 0 {
		t.Errorf("target sshd still serves %d connections", s)
	}
}

// A real sshd behind a listener that drops the first connections, as sshd
// itself does beyond MaxStartups.
func TestIntegrationSSHDHandshakeRetry(t *testing.T) {
	fastRetries(t)
	srv := testhost.SSHD(t)
	d := newDropper(t, srv.Addr, 2, false)
	cfg := sshdConfig(srv)
	cfg.Port = d.port
	cfg.KnownHostsFile = knownAs(t, srv, fmt.Sprintf("[127.0.0.1]:%d", d.port))
	c := dial(t, cfg)
	if res, err := c.Run(context.Background(), Command{Args: []string{"true"}}); err != nil {
		t.Fatalf("%v %v", res, err)
	}
	if n := d.accepted.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
}

// sshd itself throttling: with MaxStartups 1 and one unauthenticated
// connection held open, sshd drops the next; once the holder goes, the
// retry gets in.
func TestIntegrationSSHDMaxStartups(t *testing.T) {
	base, max := dialBackoffBase, dialBackoffMax
	dialBackoffBase, dialBackoffMax = 500*time.Millisecond, 2*time.Second
	t.Cleanup(func() { dialBackoffBase, dialBackoffMax = base, max })
	srv := testhost.SSHD(t, "MaxStartups 1")
	holder, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	// sshd sends its banner once it has taken the connection on.
	if _, err := bufio.NewReader(holder).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var c *SSH
	go func() {
		var err error
		c, err = DialSSH(context.Background(), sshdConfig(srv))
		done <- err
	}()
	dropped := waitLog(t, srv, "past MaxStartups", hangGuard)
	holder.Close()
	if err := <-done; err != nil {
		t.Fatalf("DialSSH: %v\nsshd log:\n%s", err, srv.Log())
	}
	defer c.Close()
	if !dropped {
		t.Fatalf("sshd never dropped a connection:\n%s", srv.Log())
	}
	if _, err := c.Run(context.Background(), Command{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
}

// waitLog waits (bounded) for sshd to log s; sshd's log is the only signal.
func waitLog(t *testing.T, srv *testhost.SSHServer, s string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for !strings.Contains(srv.Log(), s) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
