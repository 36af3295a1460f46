package engine

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateDirScriptLocale: stat's %F is translated on a host whose
// locale is not English; the script must read it in the C locale or a
// good directory is refused ("is not a directory (Verzeichnis)"). A stat
// shim on PATH answers as GNU stat would under a German locale (no such
// locale need be installed here); every level is reported as root's.
func TestStateDirScriptLocale(t *testing.T) {
	bin := t.TempDir()
	shim := `#!/bin/sh
case "${LC_ALL:-${LC_MESSAGES:-${LANG:-}}}" in
C|POSIX) echo '0 root 755 directory' ;;
*) echo '0 root 755 Verzeichnis' ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "stat"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", stateDirScript, "sh", "0", dir)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "LANG=de_DE.UTF-8", "LC_ALL=de_DE.UTF-8")
	out, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(out), "ok\n") {
		t.Fatalf("state directory %s refused under a German locale: %v: %q", dir, err, out)
	}
}
