package transport

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestIntegrationKnownHostsLikeSSH: against a real sshd on a non-standard
// port, pgtune accepts the host key under exactly the known_hosts lines
// the real ssh(1) accepts it under (strict checking), port wildcards,
// negations and the port-less retry included.
func TestIntegrationKnownHostsLikeSSH(t *testing.T) {
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		t.Fatal("ssh client not installed (apt-get install -y openssh-client)")
	}
	srv := testhost.SSHD(t)
	port := strconv.Itoa(srv.Port)
	_, key, _ := strings.Cut(srv.HostKeyLine, " ")
	_, other := newKey(t, keyEd25519)
	otherKey := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(other.PublicKey())))
	p := port[:len(port)-1] + "?"
	for _, tc := range []struct {
		lines []string
		ok    bool
	}{
		{[]string{"[127.0.0.1]:* " + key}, true},
		{[]string{"[127.0.0.1]:" + p + " " + key}, true},
		{[]string{"[127.0.0.?]:" + port + " " + key}, true},
		{[]string{"*]:" + port + " " + key}, true},
		{[]string{"127.0.0.1:" + port + " " + key}, false},
		{[]string{"[127.0.0.1]:*,![127.0.0.1]:" + port + " " + key}, false},
		{[]string{"![127.0.0.1]:" + port + ",[127.0.0.1]:* " + key}, false},
		{[]string{"[127.0.0.1]:*,!127.0.0.1 " + key}, true},
		{[]string{"127.0.0.1 " + key}, true},
		{[]string{"127.0.0.* " + key}, true},
		{[]string{"127.0.0.1 " + otherKey}, false},
		{[]string{"[127.0.0.1]:* " + otherKey}, false},
		{[]string{"[127.0.0.1]:" + port + " " + otherKey, "127.0.0.1 " + key}, false},
		{[]string{"@revoked * " + key, "[127.0.0.1]:* " + key}, false},
	} {
		name, _, _ := strings.Cut(strings.Join(tc.lines, " | "), " ssh-")
		t.Run(name, func(t *testing.T) {
			known := writeKnownHosts(t, tc.lines...)
			cmd := exec.Command(sshBin, "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
				"-o", "UserKnownHostsFile="+known, "-o", "GlobalKnownHostsFile=/dev/null", "-o", "IdentitiesOnly=yes",
				"-i", srv.KeyFile, "-p", port, "root@127.0.0.1", "true")
			out, sshErr := cmd.CombinedOutput()
			if (sshErr == nil) != tc.ok {
				t.Fatalf("ssh(1) itself: ok=%v, want %v: %s", sshErr == nil, tc.ok, out)
			}
			cfg := sshdConfig(srv)
			cfg.KnownHostsFile = known
			c, err := DialSSH(context.Background(), cfg)
			if err == nil {
				c.Close()
			}
			if (err == nil) != (sshErr == nil) {
				t.Errorf("pgtune: %v; ssh(1): %v %s", err, sshErr, out)
			}
			if err != nil && !tc.ok && !strings.Contains(err.Error(), "host key") {
				t.Errorf("pgtune refused for another reason: %v", err)
			}
		})
	}
}
