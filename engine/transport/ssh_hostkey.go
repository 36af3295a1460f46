package transport

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// knownHostsMu serialises accept-new appends from concurrent dials in this
// process (one run dials many hosts at once).
var knownHostsMu sync.Mutex

// hostKeyChecker verifies the server's key against known_hosts and keeps
// the precise refusal, which the handshake would otherwise bury under
// "ssh: handshake failed".
type hostKeyChecker struct {
	e     *endpoint
	files []string // existing files, read for verification
	db    *knownHostsDB
	err   error
}

func newHostKeyChecker(e *endpoint) (*hostKeyChecker, error) {
	hk := &hostKeyChecker{e: e}
	// User files first, then global ones, as ssh(1) reads them.
	for _, f := range append(append([]string(nil), e.knownHosts...), e.globalKnownHosts...) {
		if _, err := os.Stat(f); err == nil {
			hk.files = append(hk.files, f)
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("known_hosts %s: %w", f, err)
		}
	}
	if len(hk.files) > 0 {
		db, err := loadKnownHosts(hk.files) // knownhosts_cache.go
		if err != nil {
			return nil, fmt.Errorf("known_hosts: %w", err)
		}
		hk.db = db
	}
	return hk, nil
}

// algorithms lists the key types recorded for the endpoint (a
// @cert-authority for it included), so that a server with several host
// keys presents the one we know; recorded says there were some. For a host not recorded
// yet, the plain key types only: a server with a host certificate then
// presents its key, which can be told unknown (and recorded by
// accept-new) as ssh(1) does; offered its certificate, the check could
// only fail ("no authorities for hostname").
//
// Keys recorded only without the port (see knownHostsDB.check) come first
// but do not restrict: ssh(1) takes them as no record of this host.
func (hk *hostKeyChecker) algorithms() (algos []string, recorded bool) {
	if hk.db != nil {
		found, fallback := hk.db.recordedAlgorithms(hk.e)
		if len(found) > 0 && !fallback {
			return found, true
		}
		algos = found
	}
	// The library's default preference with the certificate types left
	// out (ssh-rsa kept: an old bastion may have nothing else), then any
	// other plain type it supports.
	defaults := []string{ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
		ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSA, ssh.KeyAlgoED25519}
	defaults = append(defaults, ssh.SupportedAlgorithms().HostKeys...)
	for _, a := range defaults {
		if !strings.Contains(a, "-cert-") && !slices.Contains(algos, a) {
			algos = append(algos, a)
		}
	}
	return algos, false
}

func (hk *hostKeyChecker) callback(hostname string, remote net.Addr, key ssh.PublicKey) error {
	var err error
	if hk.db != nil {
		db := hk.db
		checker := ssh.CertChecker{
			IsHostAuthority: func(auth ssh.PublicKey, _ string) bool { return db.isAuthority(hk.e, auth) },
			IsRevoked:       db.isRevoked,
			HostKeyFallback: func(_ string, _ net.Addr, key ssh.PublicKey) error { return db.check(hk.e, key) },
		}
		err = checker.CheckHostKey(hostname, remote, key)
	} else {
		err = &xknownhosts.KeyError{} // no file: every host is unknown
	}
	if err == nil {
		return nil
	}
	var keyErr *xknownhosts.KeyError
	switch {
	case knownhosts.IsHostKeyChanged(err) && errors.As(err, &keyErr):
		hk.err = changedKeyError(hostname, hk.e.displayName(hostname), key, keyErr.Want)
	case knownhosts.IsHostUnknown(err):
		if hk.e.policy == HostKeyAcceptNew {
			if werr := hk.appendKey(hostname, remote, key); werr != nil {
				hk.err = werr
				return werr
			}
			return nil
		}
		hk.err = unknownKeyError(hk.e.displayName(hostname), key, hk.e.knownHostsNames(), hk.e.jump)
	default:
		hk.err = fmt.Errorf("host key for %s: %w", hostname, err)
	}
	return hk.err
}

// appendKey records a first-seen key in the first known_hosts file, as
// OpenSSH's accept-new does.
func (hk *hostKeyChecker) appendKey(hostname string, remote net.Addr, key ssh.PublicKey) error {
	if len(hk.e.knownHosts) == 0 {
		// UserKnownHostsFile none: nowhere to record it, as with
		// /dev/null the key is taken for this connection only.
		return nil
	}
	file := hk.e.knownHosts[0]
	knownHostsMu.Lock()
	defer knownHostsMu.Unlock()
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("accept-new: %w", err)
	}
	// Several inventory names for one address (hosts behind one bastion
	// port) are first seen in the same run: the first connection records
	// the key, the others find it; a different key recorded meanwhile is
	// a changed key, not a second line that strict checking would take.
	if db, err := parseKnownHosts(file); err == nil {
		var keyErr *xknownhosts.KeyError
		switch err := db.check(hk.e, key); {
		case err == nil:
			return nil
		case errors.As(err, &keyErr) && len(keyErr.Want) > 0:
			return changedKeyError(hostname, hk.e.displayName(hostname), key, keyErr.Want)
		}
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("accept-new: %w", err)
	}
	// Record only the name we dialled: the remote address of a jump
	// channel is meaningless.
	if err := knownhosts.WriteKnownHost(f, hostname, &net.TCPAddr{IP: net.IPv4zero}, key); err != nil {
		f.Close()
		return fmt.Errorf("accept-new: write %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("accept-new: write %s: %w", file, err)
	}
	return nil
}

type hostKeyError struct {
	msg  string
	kind error
}

func (e *hostKeyError) Error() string { return e.msg }
func (e *hostKeyError) Unwrap() error { return e.kind }

func unknownKeyError(hostname string, key ssh.PublicKey, file string, jump bool) error {
	advice := "unknown host; add it with ssh-keyscan or set ssh_host_key_checking: accept-new"
	if jump {
		// The inventory's policy is the target's alone (resolveWith).
		advice = "unknown jump host; add it with ssh-keyscan, or set StrictHostKeyChecking accept-new in its ssh_config Host block: ssh_host_key_checking is for the target only"
	}
	return &hostKeyError{kind: ErrUnknownHostKey, msg: fmt.Sprintf(
		"host key for %s is not in %s (%s); server offered %s %s",
		hostname, file, advice, key.Type(), ssh.FingerprintSHA256(key))}
}

// knownHostsName is the name the host key is looked up and recorded under:
// host:port as dialled, or HostKeyAlias alone (ssh(1) appends no port to
// an alias; ":22" is how the known_hosts library spells "no port").
func (e *endpoint) knownHostsName() string {
	if e.hostKeyAlias != "" {
		return net.JoinHostPort(e.hostKeyAlias, "22")
	}
	return e.hostPort()
}

// displayName is how messages name the key's host: with HostKeyAlias,
// the alias and the address it stands for.
func (e *endpoint) displayName(hostname string) string {
	if e.hostKeyAlias == "" {
		return hostname
	}
	return fmt.Sprintf("%s (HostKeyAlias of %s)", e.hostKeyAlias, e.hostPort())
}

// knownHostsNames lists the files read, for messages.
func (e *endpoint) knownHostsNames() string {
	files := append(append([]string(nil), e.knownHosts...), e.globalKnownHosts...)
	if len(files) == 0 {
		return "any known_hosts file (UserKnownHostsFile none)"
	}
	return strings.Join(files, ", ")
}

func changedKeyError(hostname, display string, key ssh.PublicKey, want []xknownhosts.KnownKey) error {
	var recorded []string
	for _, w := range want {
		recorded = append(recorded, fmt.Sprintf("%s:%d has %s %s", w.Filename, w.Line, w.Key.Type(), ssh.FingerprintSHA256(w.Key)))
	}
	file := ""
	if len(want) > 0 {
		file = want[0].Filename
	}
	return &hostKeyError{kind: ErrChangedHostKey, msg: fmt.Sprintf(
		"host key for %s CHANGED: server offered %s %s but %s; possible man-in-the-middle, refusing to connect (if the host was reinstalled, remove the old entry: ssh-keygen -R %s -f %s)",
		display, key.Type(), ssh.FingerprintSHA256(key), strings.Join(recorded, ", "),
		Quote(knownhosts.Normalize(hostname)), Quote(file))}
}
