package transport

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// TestKnownHostsMatchLikeOpenSSH: known_hosts lines match as ssh(1)
// matches them, no more. Every expectation was measured with OpenSSH 9.2
// on loopback (`ssh -o StrictHostKeyChecking=yes -p PORT root@HOST`, and
// `ssh-keygen -F` for names that do not resolve); TestIntegrationKnownHostsLikeSSH
// compares with the real ssh(1) where a real sshd can be reached. Before,
// the port was compared literally after x/crypto split `[host]:port`:
// `[127.0.0.1]:*` and `[127.0.0.1]:4220?` were unknown, and `host:PORT`
// (no brackets) and `[host]:22` matched where ssh(1) matches neither.
func TestKnownHostsMatchLikeOpenSSH(t *testing.T) {
	_, right := newKey(t, keyEd25519)
	_, other := newKey(t, keyEd25519)
	line := func(hosts string, k gossh.Signer) string {
		return hosts + " " + strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k.PublicKey())))
	}
	ok, unknown, changed, revoked := "ok", "unknown", "changed", "revoked"
	loop := endpoint{host: "127.0.0.1", port: 42201}
	for _, tc := range []struct {
		name  string
		e     endpoint // loop when zero
		lines []string
		want  string
	}{
		{"exact [host]:port", endpoint{}, []string{line("[127.0.0.1]:42201", right)}, ok},
		{"port wildcard *", endpoint{}, []string{line("[127.0.0.1]:*", right)}, ok},
		{"port wildcard ?", endpoint{}, []string{line("[127.0.0.1]:4220?", right)}, ok},
		{"host wildcard in brackets", endpoint{}, []string{line("[127.0.0.?]:42201", right)}, ok},
		{"* across brackets and colon", endpoint{}, []string{line("*]:42201", right)}, ok},
		{"a lone * matches every name", endpoint{}, []string{line("*", right)}, ok},
		{"host:port without brackets is not [host]:port", endpoint{}, []string{line("127.0.0.1:42201", right)}, unknown},
		{"port wildcard for another port", endpoint{}, []string{line("[127.0.0.1]:4221*", right)}, unknown},
		{"negated port vetoes the line", endpoint{}, []string{line("[127.0.0.1]:*,![127.0.0.1]:42201", right)}, unknown},
		{"negation first vetoes too", endpoint{}, []string{line("![127.0.0.1]:42201,[127.0.0.1]:*", right)}, unknown},
		{"negated bare name does not veto [host]:port", endpoint{}, []string{line("[127.0.0.1]:*,!127.0.0.1", right)}, ok},
		{"negated other port does not veto", endpoint{}, []string{line("[127.0.0.1]:*,![127.0.0.1]:22", right)}, ok},
		{"other key under a port wildcard is a changed key", endpoint{}, []string{line("[127.0.0.1]:*", other)}, changed},
		{"other key on a line naming both forms", endpoint{}, []string{line("127.0.0.1,[127.0.0.1]:42201", other)}, changed},
		// ssh(1) "checking without port identifier": nothing recorded
		// for [host]:port, the bare host's line holds the same key.
		{"bare host on another port, same key", endpoint{}, []string{line("127.0.0.1", right)}, ok},
		{"bare wildcard on another port, same key", endpoint{}, []string{line("127.0.0.*", right)}, ok},
		{"bare host on another port, other key: new, not changed", endpoint{}, []string{line("127.0.0.1", other)}, unknown},
		{"bare host not consulted once [host]:port is recorded", endpoint{}, []string{line("[127.0.0.1]:42201", other), line("127.0.0.1", right)}, changed},
		{"names compare case-insensitively (pattern)", endpoint{host: "localhost", port: 42201}, []string{line("[LOCALHOST]:42201", right)}, ok},
		{"names compare case-insensitively (host)", endpoint{host: "LOCALHOST", port: 42201}, []string{line("[local*]:42201", right)}, ok},
		// ssh(1) folds A-Z only: the Kelvin sign (U+212A) is no k there.
		{"no Unicode case folding (pattern)", endpoint{host: "127.0.0.1", port: 42201, hostKeyAlias: "kelvink"}, []string{line("kelvin\u212a", right)}, unknown},
		{"no Unicode case folding (alias)", endpoint{host: "127.0.0.1", port: 42201, hostKeyAlias: "kelvin\u212a"}, []string{line("kelvink", right)}, unknown},
		{"name wildcard with a port", endpoint{host: "db1.example", port: 2222}, []string{line("[db*.example]:2222", right)}, ok},
		{"name wildcard with another port", endpoint{host: "db1.example", port: 2223}, []string{line("[db*.example]:2222", right)}, unknown},
		{"port 22 is the bare name", endpoint{host: "127.0.0.1", port: 22}, []string{line("127.0.0.1", right)}, ok},
		{"[host]:22 is not the bare name", endpoint{host: "127.0.0.1", port: 22}, []string{line("[127.0.0.1]:22", right)}, unknown},
		{"HostKeyAlias alone, case-insensitively", endpoint{host: "127.0.0.1", port: 42201, hostKeyAlias: "Proxied-DB1"}, []string{line("proxied-db1", right)}, ok},
		{"HostKeyAlias takes no port", endpoint{host: "127.0.0.1", port: 42201, hostKeyAlias: "proxied-db1"}, []string{line("[proxied-db1]:42201", right)}, unknown},
		{"HostKeyAlias: no port-less retry", endpoint{host: "127.0.0.1", port: 42201, hostKeyAlias: "proxied-db1"}, []string{line("127.0.0.1", right)}, unknown},
		{"hashed [host]:port", endpoint{}, []string{line(xknownhosts.HashHostname("[127.0.0.1]:42201"), right)}, ok},
		{"hashed bare host on another port", endpoint{}, []string{line(xknownhosts.HashHostname("127.0.0.1"), right)}, ok},
		{"hashed other name", endpoint{}, []string{line(xknownhosts.HashHostname("[127.0.0.1]:42202"), right)}, unknown},
		{"@revoked for every host", endpoint{}, []string{"@revoked " + line("*", right), line("[127.0.0.1]:*", right)}, revoked},
		// ssh(1) honours @revoked only where its patterns match; pgtune
		// refuses a revoked key everywhere (stricter, on purpose).
		{"@revoked for another host still refused", endpoint{}, []string{"@revoked " + line("[127.0.0.1]:9", right), line("[127.0.0.1]:*", right)}, revoked},
		{"a @cert-authority line is no plain key", endpoint{}, []string{"@cert-authority " + line("[127.0.0.1]:*", other)}, unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.e
			if e.host == "" {
				e = loop
			}
			e.knownHosts = []string{writeKnownHosts(t, tc.lines...)}
			e.policy = HostKeyStrict
			hk, err := newHostKeyChecker(&e)
			if err != nil {
				t.Fatal(err)
			}
			err = hk.callback(e.knownHostsName(), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: e.port}, right.PublicKey())
			got := "error: " + errString(err)
			var rev *xknownhosts.RevokedError
			switch {
			case err == nil:
				got = ok
			case errors.Is(err, ErrUnknownHostKey):
				got = unknown
			case errors.Is(err, ErrChangedHostKey):
				got = changed
			case errors.As(err, &rev):
				got = revoked
			}
			if got != tc.want {
				t.Errorf("%q for %s (HostKeyAlias %q): %s, want %s", tc.lines, e.hostPort(), e.hostKeyAlias, got, tc.want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestAcceptNewPortlessOtherKey: a key recorded for the bare host only,
// different from the one a non-standard port serves, is no record of
// [host]:port; ssh(1) accept-new records the new key under [host]:port,
// and so does pgtune; the bare host's line stays as it was.
func TestAcceptNewPortlessOtherKey(t *testing.T) {
	_, served := newKey(t, keyEd25519)
	_, other := newKey(t, keyEd25519)
	bare := "127.0.0.1 " + strings.TrimSpace(string(gossh.MarshalAuthorizedKey(other.PublicKey())))
	known := writeKnownHosts(t, bare)
	e := &endpoint{host: "127.0.0.1", port: 42201, knownHosts: []string{known}, policy: HostKeyAcceptNew}
	hk, err := newHostKeyChecker(e)
	if err != nil {
		t.Fatal(err)
	}
	if err := hk.callback(e.knownHostsName(), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 42201}, served.PublicKey()); err != nil {
		t.Fatalf("accept-new: %v", err)
	}
	data, err := os.ReadFile(known)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || lines[0] != bare || !strings.HasPrefix(lines[1], "[127.0.0.1]:42201 ssh-ed25519 ") {
		t.Errorf("known_hosts after accept-new:\n%s", data)
	}
}

// TestCertAuthorityWithPortWildcard: a @cert-authority line is matched
// like any other (its port wildcard included), and a negated pattern keeps
// the authority from the host it names.
func TestCertAuthorityWithPortWildcard(t *testing.T) {
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub}, withHostCert())
	ca := "@cert-authority %s " + strings.TrimSpace(string(gossh.MarshalAuthorizedKey(srv.hostCA)))
	for _, tc := range []struct {
		patterns string
		ok       bool
	}{
		{"[127.0.0.1]:*", true},
		{"[127.0.0.1]:*,![127.0.0.1]:" + itoa(srv.Port), false},
		{"127.0.0.1:" + itoa(srv.Port), false},
	} {
		t.Run(tc.patterns, func(t *testing.T) {
			cfg := srv.baseConfig(key, writeKnownHosts(t, strings.Replace(ca, "%s", tc.patterns, 1)))
			c, err := DialSSH(t.Context(), cfg)
			if tc.ok {
				if err != nil {
					t.Fatalf("DialSSH: %v", err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("DialSSH succeeded: the authority does not cover this host")
			}
			if !errors.Is(err, ErrUnknownHostKey) {
				t.Errorf("err = %v, want an unknown host", err)
			}
		})
	}
}

// TestRevokedLineUnreadable: ssh(1) skips a known_hosts line it cannot
// read; an unreadable @revoked line skipped would let the key it revokes
// in (the host's other line matches), so pgtune refuses the file, naming
// the line.
func TestRevokedLineUnreadable(t *testing.T) {
	_, right := newKey(t, keyEd25519)
	good := "[127.0.0.1]:* " + strings.TrimSpace(string(gossh.MarshalAuthorizedKey(right.PublicKey())))
	e := endpoint{host: "127.0.0.1", port: 42201, policy: HostKeyStrict}
	e.knownHosts = []string{writeKnownHosts(t, "@revoked * ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI-cut", good)}
	hk, err := newHostKeyChecker(&e)
	if err == nil {
		err = hk.callback(e.knownHostsName(), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: e.port}, right.PublicKey())
	}
	if err == nil || !strings.Contains(err.Error(), ":1: a @revoked line pgtune cannot read") {
		t.Fatalf("err = %v, want the unreadable @revoked line refused", err)
	}
}
