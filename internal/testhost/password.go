package testhost

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// PasswordUser makes name (as EnsureUser does) log in with a fresh random
// password and run sudo only with that password, asked every time
// (timestamp_timeout=0, so every command meets the prompt). It returns
// the password. When the test ends the password is removed and the
// sudoers drop-in with it.
func PasswordUser(t testing.TB, name string) string {
	t.Helper()
	EnsureUser(t, name, false)
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	password := "pw-" + hex.EncodeToString(b)
	chpasswd := exec.Command("chpasswd")
	chpasswd.Stdin = strings.NewReader(name + ":" + password + "\n")
	if out, err := chpasswd.CombinedOutput(); err != nil {
		t.Fatalf("testhost: chpasswd %s: %v: %s", name, err, out)
	}
	drop := filepath.Join("/etc/sudoers.d", "pgtune-test-"+name+"-password")
	tmp := drop + ".tmp"
	writeFile(t, tmp, name+" ALL=(ALL:ALL) ALL\nDefaults:"+name+" timestamp_timeout=0, lecture=never\n", 0o440)
	if out, err := exec.Command("visudo", "-cf", tmp).CombinedOutput(); err != nil {
		os.Remove(tmp)
		t.Fatalf("testhost: visudo -cf: %v: %s", err, out)
	}
	if err := os.Rename(tmp, drop); err != nil {
		t.Fatalf("testhost: %v", err)
	}
	t.Cleanup(func() {
		os.Remove(drop)
		_ = exec.Command("usermod", "-p", "*", name).Run()
	})
	return password
}
