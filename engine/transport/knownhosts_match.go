package transport

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// known_hosts as ssh(1) reads it (sshd(8), SSH_KNOWN_HOSTS FILE FORMAT).
// The x/crypto matcher splits a pattern into host and port and compares
// the port literally, so `[127.0.0.1]:*` never matched, while `host:2222`
// (no brackets) and `[host]:22` matched where ssh(1) matches neither. ssh(1)
// instead matches each comma-separated pattern, `*` and `?` wildcards and
// `!` negation, case-insensitively against one string: the host alone on
// port 22, `[host]:port` on any other, or the HostKeyAlias alone. Measured
// with OpenSSH 9.2 on loopback (TestIntegrationKnownHostsLikeSSH).

const (
	markerCA      = "@cert-authority"
	markerRevoked = "@revoked"
)

type knownHostsLine struct {
	marker   string // "", markerCA or markerRevoked
	patterns string // the host field as written
	salt     []byte // a hashed host field (|1|salt|hash): its salt and hash
	hash     []byte
	key      ssh.PublicKey
	file     string
	line     int
}

// knownHostsDB is a list of known_hosts files, parsed once.
type knownHostsDB struct {
	lines []knownHostsLine
}

// parseKnownHosts reads files in order. As ssh(1) does, lines it cannot
// read are skipped; a file with such lines and no valid one is an error
// (likely not a known_hosts file at all), as it was with x/crypto.
func parseKnownHosts(files ...string) (*knownHostsDB, error) {
	db := &knownHostsDB{}
	for _, f := range files {
		if err := db.read(f); err != nil {
			return nil, err
		}
	}
	return db, nil
}

func (db *knownHostsDB) read(file string) error {
	fh, err := os.Open(file)
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	valid, n := 0, 0
	var firstErr error
	firstLine := 0
	for sc.Scan() {
		n++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		l, err := parseKnownHostsLine(string(text))
		if err != nil && bytes.HasPrefix(text, []byte(markerRevoked)) {
			// ssh(1) skips a line it cannot read; a revocation skipped
			// would let the revoked key in, so the file is refused.
			return fmt.Errorf("%s:%d: a %s line pgtune cannot read: %v (fix or remove it; a revocation is never ignored)", file, n, markerRevoked, err)
		}
		if err != nil {
			if firstErr == nil {
				firstErr, firstLine = err, n
			}
			continue
		}
		l.file, l.line = file, n
		db.lines = append(db.lines, l)
		valid++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if valid == 0 && firstErr != nil {
		return fmt.Errorf("%s: no valid entries, line %d: %v", file, firstLine, firstErr)
	}
	return nil
}

func parseKnownHostsLine(text string) (knownHostsLine, error) {
	var l knownHostsLine
	f := strings.Fields(text)
	if len(f) > 0 && strings.HasPrefix(f[0], "@") {
		if f[0] != markerCA && f[0] != markerRevoked {
			return l, fmt.Errorf("unknown marker %q", f[0])
		}
		l.marker, f = f[0], f[1:]
	}
	if len(f) < 3 {
		return l, errors.New("want host patterns, key type and key")
	}
	l.patterns = f[0]
	if strings.HasPrefix(l.patterns, "|") {
		salt, hash, err := decodeHashedHost(l.patterns)
		if err != nil {
			return l, err
		}
		l.salt, l.hash = salt, hash
	}
	blob, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil {
		return l, fmt.Errorf("key: %w", err)
	}
	if l.key, err = ssh.ParsePublicKey(blob); err != nil {
		return l, fmt.Errorf("key: %w", err)
	}
	if l.key.Type() != f[1] {
		return l, fmt.Errorf("key type %s written as %s", l.key.Type(), f[1])
	}
	return l, nil
}

// decodeHashedHost reads "|1|salt|hash" (HashKnownHosts), the only hash
// type OpenSSH writes.
func decodeHashedHost(s string) (salt, hash []byte, err error) {
	parts := strings.Split(s, "|")
	if len(parts) != 4 || parts[1] != "1" {
		return nil, nil, fmt.Errorf("hashed host %q: want |1|salt|hash", s)
	}
	if salt, err = base64.StdEncoding.DecodeString(parts[2]); err != nil {
		return nil, nil, fmt.Errorf("hashed host salt: %w", err)
	}
	if hash, err = base64.StdEncoding.DecodeString(parts[3]); err != nil {
		return nil, nil, fmt.Errorf("hashed host hash: %w", err)
	}
	return salt, hash, nil
}

// asciiLower lowercases A-Z only, as OpenSSH's tolower() in the C locale
// does: strings.ToLower folds Unicode too (the Kelvin sign U+212A to k),
// so a name could match a known_hosts pattern ssh(1) never matches.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// knownHostsLookup is the name ssh(1) looks a host's key up under
// (sshconnect.c): the HostKeyAlias alone; else the host alone on port 22,
// "[host]:port" on another; lowercased, as ssh(1) lowercases the host
// name and the alias before matching.
func knownHostsLookup(host string, port int, alias string) string {
	if alias != "" {
		return asciiLower(alias)
	}
	host = asciiLower(host)
	if port == 22 {
		return host
	}
	return "[" + host + "]:" + strconv.Itoa(port)
}

// matches says whether the line's host field matches name: a hashed field
// by its HMAC, else the pattern list as match_hostname(3) does it.
func (l *knownHostsLine) matches(name string) bool {
	if l.hash != nil {
		mac := hmac.New(sha1.New, l.salt)
		mac.Write([]byte(name))
		return hmac.Equal(mac.Sum(nil), l.hash)
	}
	return matchHostPatterns(name, l.patterns)
}

// matchHostPatterns is OpenSSH's match_hostname: name (lowercase) against
// a comma-separated list, each pattern lowercased, `!` negating; a negated
// pattern that matches vetoes the whole list; `*` matches any run of
// bytes, brackets, colons and dots included (globMatch, as for Host
// lines). As OpenSSH does, a pattern of 1023 bytes or more fails the list.
func matchHostPatterns(name, list string) bool {
	positive := false
	for _, p := range strings.Split(list, ",") {
		negated := strings.HasPrefix(p, "!")
		if negated {
			p = p[1:]
		}
		if len(p) >= 1023 {
			return false
		}
		if !globMatch(asciiLower(p), name) {
			continue
		}
		if negated {
			return false
		}
		positive = true
	}
	return positive
}

// lookupNames are the names a host's key is looked for under, in order:
// the lookup name, then, on a port other than 22 and without a
// HostKeyAlias, the host alone: ssh(1) "checking without port
// identifier" when nothing is recorded for [host]:port.
func (e *endpoint) lookupNames() (primary, fallback string) {
	primary = knownHostsLookup(e.host, e.port, e.hostKeyAlias)
	if e.hostKeyAlias == "" && e.port != 22 {
		fallback = knownHostsLookup(e.host, 22, "")
	}
	return primary, fallback
}

// find returns the lines with marker that match name.
func (db *knownHostsDB) find(marker, name string) []knownHostsLine {
	var out []knownHostsLine
	for _, l := range db.lines {
		if l.marker == marker && l.matches(name) {
			out = append(out, l)
		}
	}
	return out
}

// findFor is find under the primary name, else under the fallback one;
// fromFallback says which.
func (db *knownHostsDB) findFor(e *endpoint, marker string) (lines []knownHostsLine, fromFallback bool) {
	primary, fallback := e.lookupNames()
	if lines = db.find(marker, primary); len(lines) > 0 || fallback == "" {
		return lines, false
	}
	return db.find(marker, fallback), true
}

// revoked is the @revoked line for key, if any. Unlike ssh(1), which
// honours a @revoked line only for the hosts its patterns match, a revoked
// key is refused for every host (x/crypto's rule, kept: never accept what
// the file says must not ever be accepted).
func (db *knownHostsDB) revoked(key ssh.PublicKey) *knownHostsLine {
	blob := key.Marshal()
	for i, l := range db.lines {
		if l.marker == markerRevoked && bytes.Equal(l.key.Marshal(), blob) {
			return &db.lines[i]
		}
	}
	return nil
}

// check verifies a plain host key for e, as ssh(1) does: accepted when a
// line for its name holds the key; a changed key when lines for its name
// hold others; unknown when none is recorded for it. Lines found only
// without the port accept the same key, and are otherwise no record of
// this host (ssh(1) then treats it as new, as accept-new does too).
// Errors are x/crypto's types, which the callers already tell apart.
func (db *knownHostsDB) check(e *endpoint, key ssh.PublicKey) error {
	if r := db.revoked(key); r != nil {
		return &xknownhosts.RevokedError{Revoked: r.known()}
	}
	lines, fromFallback := db.findFor(e, "")
	blob := key.Marshal()
	var want []xknownhosts.KnownKey
	for _, l := range lines {
		if bytes.Equal(l.key.Marshal(), blob) {
			return nil
		}
		want = append(want, l.known())
	}
	if fromFallback {
		want = nil
	}
	return &xknownhosts.KeyError{Want: want}
}

// isAuthority says whether auth is a @cert-authority for e's name (the
// port-less name when no authority is recorded under it), for
// ssh.CertChecker.
func (db *knownHostsDB) isAuthority(e *endpoint, auth ssh.PublicKey) bool {
	if db.revoked(auth) != nil {
		return false
	}
	lines, _ := db.findFor(e, markerCA)
	for _, l := range lines {
		if bytes.Equal(l.key.Marshal(), auth.Marshal()) {
			return true
		}
	}
	return false
}

// isRevoked is ssh.CertChecker's IsRevoked: the certificate's key or its
// signer revoked.
func (db *knownHostsDB) isRevoked(cert *ssh.Certificate) bool {
	return db.revoked(cert.Key) != nil || db.revoked(cert.SignatureKey) != nil
}

// recordedAlgorithms lists the host key algorithms for the keys recorded
// under e's own name (a @cert-authority as its certificate types), in file
// order; fallback lists those of the port-less name when nothing is
// recorded under its own, which ssh(1) takes as a preference, not as a
// record of this host.
func (db *knownHostsDB) recordedAlgorithms(e *endpoint) (algos []string, fallback bool) {
	primary, fb := e.lookupNames()
	var lines []knownHostsLine
	for _, l := range db.lines {
		if l.marker != markerRevoked && l.matches(primary) {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 && fb != "" {
		fallback = true
		for _, l := range db.lines {
			if l.marker == "" && l.matches(fb) {
				lines = append(lines, l)
			}
		}
	}
	for _, l := range lines {
		for _, a := range algorithmsOf(l.key.Type(), l.marker == markerCA) {
			if !slices.Contains(algos, a) {
				algos = append(algos, a)
			}
		}
	}
	return algos, fallback
}

// algorithmsOf is the host key algorithms a recorded key type stands for:
// an RSA key signs with SHA-2 too, a CA's key vouches for certificates.
func algorithmsOf(typ string, ca bool) []string {
	var out []string
	if typ == ssh.KeyAlgoRSA {
		out = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	} else {
		out = []string{typ}
	}
	if !ca {
		return out
	}
	certs := map[string]string{
		ssh.KeyAlgoRSASHA512: ssh.CertAlgoRSASHA512v01, ssh.KeyAlgoRSASHA256: ssh.CertAlgoRSASHA256v01,
		ssh.KeyAlgoRSA: ssh.CertAlgoRSAv01, ssh.KeyAlgoDSA: ssh.CertAlgoDSAv01,
		ssh.KeyAlgoECDSA256: ssh.CertAlgoECDSA256v01, ssh.KeyAlgoECDSA384: ssh.CertAlgoECDSA384v01,
		ssh.KeyAlgoECDSA521: ssh.CertAlgoECDSA521v01, ssh.KeyAlgoED25519: ssh.CertAlgoED25519v01,
		ssh.KeyAlgoSKECDSA256: ssh.CertAlgoSKECDSA256v01, ssh.KeyAlgoSKED25519: ssh.CertAlgoSKED25519v01,
	}
	for i, a := range out {
		if c, ok := certs[a]; ok {
			out[i] = c
		}
	}
	return out
}

func (l *knownHostsLine) known() xknownhosts.KnownKey {
	return xknownhosts.KnownKey{Key: l.key, Filename: l.file, Line: l.line}
}
