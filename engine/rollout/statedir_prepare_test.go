package rollout

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSecureDirMakesOnlyUnderSafeLevels: missing levels of the state
// directory are made one at a time, and only below levels that passed:
// nothing is made in a home owned by another user (root run with sudo -E
// would leave root-owned directories there that the user cannot remove,
// and their own pgtune would then be refused), nor through a link of
// theirs, nor under a level anyone may write.
func TestSecureDirMakesOnlyUnderSafeLevels(t *testing.T) {
	const nobody = 65534
	tests := []struct {
		name   string
		asRoot bool
		// setup makes the tree under base and returns the state directory.
		setup func(t *testing.T, base string) string
		want  string // "" when the directory is made
		// untouched must not have gained an entry.
		untouched string
	}{
		{"home of another user", true, func(t *testing.T, base string) string {
			home := filepath.Join(base, "home")
			must(t, os.Mkdir(home, 0o755))
			must(t, os.Chown(home, nobody, nobody))
			return filepath.Join(home, ".local", "state", "pgtune", "runs")
		}, "home is owned by uid 65534, neither you", "home"},
		{"a link of another user's into a directory of theirs", true, func(t *testing.T, base string) string {
			theirs := filepath.Join(base, "theirs")
			must(t, os.Mkdir(theirs, 0o755))
			must(t, os.Chown(theirs, nobody, nobody))
			must(t, os.Symlink(theirs, filepath.Join(base, "state")))
			return filepath.Join(base, "state", "pgtune", "runs")
		}, "theirs is owned by uid 65534, neither you", "theirs"},
		{"under a level anyone may write (an emptyDir)", false, func(t *testing.T, base string) string {
			open := filepath.Join(base, "open")
			must(t, os.Mkdir(open, 0o700))
			must(t, os.Chmod(open, 0o777))
			return filepath.Join(open, "pgtune", "runs")
		}, "open is writable by group or others (mode 0777)", "open"},
		{"under an fsGroup volume", false, func(t *testing.T, base string) string {
			vol := filepath.Join(base, "vol")
			must(t, os.Mkdir(vol, 0o700))
			must(t, os.Chmod(vol, 0o775|os.ModeSetgid))
			return filepath.Join(vol, "pgtune", "runs")
		}, "vol is writable by group or others (mode 2775)", "vol"},
		{"private, nothing there yet", false, func(t *testing.T, base string) string {
			return filepath.Join(base, "state", "pgtune", "runs")
		}, "", ""},
		{"under a sticky level anyone may write", false, func(t *testing.T, base string) string {
			shared := filepath.Join(base, "shared")
			must(t, os.Mkdir(shared, 0o700))
			must(t, os.Chmod(shared, 0o777|os.ModeSticky))
			return filepath.Join(shared, "pgtune", "runs")
		}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.asRoot && os.Getuid() != 0 {
				t.Skip("changing a directory's owner needs root")
			}
			base := t.TempDir()
			dir := tt.setup(t, base)
			real, err := secureDir(dir, true)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("secureDir = %q, %v; want an error with %q", real, err, tt.want)
				}
				if ents, _ := os.ReadDir(filepath.Join(base, tt.untouched)); len(ents) != 0 {
					t.Errorf("made in %s: %v", tt.untouched, ents)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Each level made is private.
			for p := real; p != base && strings.HasPrefix(p, base); p = filepath.Dir(p) {
				if fi, err := os.Lstat(p); err != nil || fi.Mode().Perm() != 0o700 {
					if !strings.HasSuffix(p, "/shared") {
						t.Errorf("%s: %v %v; want a directory 0700", p, fi.Mode(), err)
					}
				}
			}
		})
	}
}

// TestPrepareUnsafeDir: a new run in a state directory others could
// change goes on with its state in memory (nothing written, Lock does
// nothing), and says which level, why and how to fix it, per level: the
// directory itself takes chmod go-w, a level above chmod +t or go-w, a
// level owned by someone else only another XDG_STATE_HOME. Resuming from
// there is refused with the same advice.
func TestPrepareUnsafeDir(t *testing.T) {
	const id = "20261130T100000Z-aaaaaa"
	tests := []struct {
		name  string
		setup func(t *testing.T, root string) // root is XDG_STATE_HOME
		level string                          // relative to root
		want  []string
		not   []string
	}{
		{"XDG_STATE_HOME an emptyDir (0777, not sticky)", func(t *testing.T, root string) { must(t, os.Chmod(root, 0o777)) }, ".",
			[]string{"writable by group or others (mode 0777)", "chmod +t ROOT", "chmod go-w ROOT", "XDG_STATE_HOME", "cannot be resumed with --resume"}, nil},
		{"XDG_STATE_HOME an fsGroup volume (2775)", func(t *testing.T, root string) {
			must(t, os.Chmod(root, 0o775|os.ModeSetgid))
		}, ".", []string{"(mode 2775)", "chmod +t ROOT"}, nil},
		{"the state directory writable by its group", func(t *testing.T, root string) {
			must(t, os.MkdirAll(filepath.Join(root, "pgtune", "runs"), 0o700))
			must(t, os.Chmod(filepath.Join(root, "pgtune", "runs"), 0o770))
		}, "pgtune/runs", []string{"(mode 0770)", "chmod go-w ROOT"}, []string{"chmod +t"}},
		{"the state directory a file", func(t *testing.T, root string) {
			must(t, os.MkdirAll(filepath.Join(root, "pgtune"), 0o700))
			must(t, os.WriteFile(filepath.Join(root, "pgtune", "runs"), nil, 0o600))
		}, "pgtune/runs", []string{"is not a directory", "set XDG_STATE_HOME"}, []string{"chmod"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			t.Setenv("XDG_STATE_HOME", root)
			tt.setup(t, root)
			dir, err := Dir()
			must(t, err)
			level := filepath.Join(root, tt.level)
			s := NewState(dir, id, time.Now())
			unsafe, err := s.Prepare()
			if err != nil || unsafe == nil || s.Kept() {
				t.Fatalf("Prepare = %v, %v (kept %v); want it unsafe and not kept", unsafe, err, s.Kept())
			}
			msg := unsafe.Warning()
			if unsafe.Level != level || !strings.Contains(msg, level+" ") {
				t.Errorf("level %q, want %q: %s", unsafe.Level, level, msg)
			}
			for _, w := range tt.want {
				if w = strings.ReplaceAll(w, "ROOT", level); !strings.Contains(msg, w) {
					t.Errorf("warning without %q: %s", w, msg)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(msg, w) {
					t.Errorf("warning with %q: %s", w, msg)
				}
			}
			release, err := s.Lock()
			must(t, err)
			release()
			must(t, s.Save())
			if fi, err := os.Lstat(filepath.Join(root, "pgtune")); tt.level == "." && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("made under the unsafe level: %v %v", fi, err)
			}
			if _, err := os.Lstat(s.Path()); err == nil {
				t.Errorf("state file written: %v", err)
			}
			// Reading from there is refused, with the same advice.
			_, err = Resume(dir, "", Match{})
			var refused *UnsafeDirError
			if !errors.As(err, &refused) || refused.Fix() != unsafe.Fix() {
				t.Errorf("Resume = %v; want the refusal with %q", err, unsafe.Fix())
			}
		})
	}
	// A safe directory is made and kept.
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir, err := Dir()
	must(t, err)
	s := NewState(dir, id, time.Now())
	if unsafe, err := s.Prepare(); unsafe != nil || err != nil || !s.Kept() {
		t.Fatalf("Prepare in a private directory = %v, %v", unsafe, err)
	}
	must(t, s.Save())
	if _, err := Load(dir, id); err != nil {
		t.Error(err)
	}
}

// TestPrepareUnmadeDir: a state directory that cannot be made (a
// container's read-only root file system, a HOME it may not write) costs
// the run its resume, with a warning, not the apply. As root, a read-only
// tmpfs; otherwise a parent without write permission.
func TestPrepareUnmadeDir(t *testing.T) {
	root := t.TempDir()
	ro := filepath.Join(root, "ro")
	must(t, os.Mkdir(ro, 0o700))
	if os.Getuid() == 0 {
		if err := unix.Mount("tmpfs", ro, "tmpfs", unix.MS_RDONLY, "mode=0700"); err != nil {
			t.Fatalf("mount a read-only tmpfs: %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(ro, 0) })
	} else {
		must(t, os.Chmod(ro, 0o500))
		t.Cleanup(func() { _ = os.Chmod(ro, 0o700) })
	}
	t.Setenv("XDG_STATE_HOME", ro)
	dir, err := Dir()
	must(t, err)
	s := NewState(dir, "20261130T100000Z-bbbbbb", time.Now())
	unsafe, err := s.Prepare()
	if err != nil || unsafe == nil || s.Kept() {
		t.Fatalf("Prepare = %v, %v (kept %v); want it not kept, with a warning", unsafe, err, s.Kept())
	}
	if msg := unsafe.Warning(); !strings.Contains(msg, "cannot be resumed with --resume") || !strings.Contains(msg, "set XDG_STATE_HOME") {
		t.Errorf("warning: %s", msg)
	}
	release, err := s.Lock()
	must(t, err)
	release()
	must(t, s.Save())
}
