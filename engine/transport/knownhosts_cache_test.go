package transport

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func knownLine(t *testing.T, host string) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return host + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + "\n"
}

// TestKnownHostsCache: a dial reuses the parse of unchanged known_hosts
// files, and sees a change (an accept-new append, a file replaced) at once.
func TestKnownHostsCache(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(file, []byte(knownLine(t, "10.0.0.1")), 0o600); err != nil {
		t.Fatal(err)
	}
	knows := func(host string) bool {
		t.Helper()
		db, err := loadKnownHosts([]string{file})
		if err != nil {
			t.Fatal(err)
		}
		algos, _ := db.recordedAlgorithms(&endpoint{host: host, port: 22})
		return len(algos) > 0
	}
	first, err := loadKnownHosts([]string{file})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := loadKnownHosts([]string{file}); again != first {
		t.Error("unchanged file parsed again")
	}
	if !knows("10.0.0.1") || knows("10.0.0.2") {
		t.Fatal("the parse does not hold the file's hosts")
	}

	// An append, as accept-new records a key.
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(knownLine(t, "10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !knows("10.0.0.2") {
		t.Error("a host appended to the file is not seen")
	}

	// The file replaced by another (a new inode) of the same size.
	repl := filepath.Join(dir, "new")
	if err := os.WriteFile(repl, []byte(strings.Replace(knownLine(t, "10.0.0.1")+knownLine(t, "10.0.0.2"), "10.0.0.1", "10.0.0.9", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(repl, file); err != nil {
		t.Fatal(err)
	}
	if knows("10.0.0.1") || !knows("10.0.0.9") {
		t.Error("a replaced file is not read again")
	}

	// Only the last few lists of files are kept.
	var others []string
	for i := 0; i < knownHostsCacheSize; i++ {
		p := filepath.Join(dir, fmt.Sprintf("other%d", i))
		if err := os.WriteFile(p, []byte(knownLine(t, "other")), 0o600); err != nil {
			t.Fatal(err)
		}
		others = append(others, p)
		if _, err := loadKnownHosts([]string{p}); err != nil {
			t.Fatal(err)
		}
	}
	knownHostsCache.Lock()
	n := len(knownHostsCache.entries)
	for _, e := range knownHostsCache.entries {
		if e.files[0] == file {
			t.Errorf("%s still cached after %d other lists", file, len(others))
		}
	}
	knownHostsCache.Unlock()
	if n != knownHostsCacheSize {
		t.Errorf("%d lists cached, want %d", n, knownHostsCacheSize)
	}

	// A missing file is reported as before.
	if _, err := loadKnownHosts([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("missing file: no error")
	}
}
