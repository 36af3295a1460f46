package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
)

// TestCheckStateDirLinkMadeAfterFirstWalk (review h104): a level missing
// when the given path is walked is left unchecked there; another user who
// makes it a link (in a sticky directory) before realpath runs sends the
// state directory wherever the link points. The race is made certain by a
// realpath on PATH that plants nobody's link first.
func TestCheckStateDirLinkMadeAfterFirstWalk(t *testing.T) {
	needRoot(t)
	nobody := nobodyUID(t)
	real, err := exec.LookPath("realpath")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	elsewhere := mkdir(t, filepath.Join(root, "elsewhere"), 0o755, 0) // root's, chosen by nobody
	tmp := mkdir(t, filepath.Join(root, "tmp"), os.ModeSticky|0o777, 0)
	link := filepath.Join(tmp, "pgtune")
	bin := t.TempDir()
	shim := fmt.Sprintf("#!/bin/sh\nln -s %s %s && chown -h %d:%d %s\nexec %s \"$@\"\n", elsewhere, link, nobody, nobody, link, real)
	if err := os.WriteFile(filepath.Join(bin, "realpath"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	got, err := checkStateDir(context.Background(), transport.NewLocal(), filepath.Join(link, "runs"), false, true)
	if err == nil {
		t.Fatalf("state directory accepted as %s: nobody's link %s chose where it went", got, link)
	}
	if !strings.Contains(err.Error(), "symbolic link owned by nobody") {
		t.Fatalf("refused for another reason: %v", err)
	}
}
