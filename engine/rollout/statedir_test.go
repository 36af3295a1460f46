package rollout

import (
	"cmp"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStateDirRefused: a run state directory someone else could write is
// refused, for saving and for resuming: a resume takes the run's
// inventory from the file, and an inventory can run commands (ssh_config
// ProxyCommand, pg_restart). A state file that is a symbolic link is not
// followed.
func TestStateDirRefused(t *testing.T) {
	const id = "20261130T100000Z-aaaaaa"
	const nobody = 65534
	tests := []struct {
		name string
		// setup changes the tree after the run was saved there; root is
		// XDG_STATE_HOME, dir the state directory.
		setup    func(t *testing.T, root, dir string)
		asRoot   bool   // needs root (chown)
		saveErr  string // "" when Save still works
		resumErr string // "" when Resume still works
	}{
		{"state directory writable by everyone", chmod("pgtune/runs", 0o777), false,
			"runs is writable by group or others (mode 0777)", "runs is writable by group or others (mode 0777)"},
		{"state directory writable by its group", chmod("pgtune/runs", 0o770), false,
			"writable by group or others (mode 0770)", "writable by group or others (mode 0770)"},
		{"state directory sticky and writable by everyone", chmod("pgtune/runs", 0o1777), false,
			"writable by group or others (mode 1777)", "writable by group or others (mode 1777)"},
		{"the pgtune level writable by everyone", chmod("pgtune", 0o777), false,
			"pgtune is writable by group or others (mode 0777)", "pgtune is writable by group or others"},
		{"XDG_STATE_HOME writable by everyone, not sticky", chmod(".", 0o777), false,
			"writable by group or others (mode 0777)", "writable by group or others (mode 0777)"},
		{"state directory owned by another user", chown("pgtune/runs", nobody), true,
			"is owned by uid 65534, not you", "is owned by uid 65534, not you"},
		{"the pgtune level owned by another user", chown("pgtune", nobody), true,
			"pgtune is owned by uid 65534, neither you", "pgtune is owned by uid 65534, neither you"},
		{"state directory a link to a directory everyone may write", func(t *testing.T, root, dir string) {
			open := filepath.Join(root, "open")
			must(t, os.Rename(dir, open))
			must(t, os.Chmod(open, 0o777))
			must(t, os.Symlink(open, dir))
		}, false, "open is writable by group or others", "open is writable by group or others"},
		{"state file a symbolic link", func(t *testing.T, root, dir string) {
			p := filepath.Join(dir, id+".json")
			elsewhere := filepath.Join(root, "elsewhere.json")
			must(t, os.Rename(p, elsewhere))
			must(t, os.Symlink(elsewhere, p))
		}, false, "", "a symbolic link: refusing to follow it"},
		{"state file writable by others", func(t *testing.T, root, dir string) {
			must(t, os.Chmod(filepath.Join(dir, id+".json"), 0o666))
		}, false, "", "mode 0666: it must be yours and writable by no one else"},
		{"state file owned by another user", func(t *testing.T, root, dir string) {
			must(t, os.Chown(filepath.Join(dir, id+".json"), nobody, nobody))
		}, true, "", "owned by uid 65534"},
		// Allowed: a sticky shared level above (/tmp), a link to a
		// private directory.
		{"XDG_STATE_HOME sticky and writable by everyone", chmod(".", 0o1777), false, "", ""},
		{"state directory a link to a private directory", func(t *testing.T, root, dir string) {
			private := filepath.Join(root, "private")
			must(t, os.Rename(dir, private))
			must(t, os.Symlink(private, dir))
		}, false, "", ""},
	}
	// Without an id, Resume only looks at regular files (as before).
	latest := map[string]string{"state file a symbolic link": "no run to resume"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.asRoot && os.Getuid() != 0 {
				t.Skip("changing a directory's owner needs root")
			}
			root := t.TempDir()
			t.Setenv("XDG_STATE_HOME", root)
			dir, err := Dir()
			must(t, err)
			s := NewState(dir, id, time.Now())
			s.Inventory = "/srv/fleet/inventory.yml"
			s.Status = Interrupted
			must(t, s.Save())
			// Another user's edit: the inventory a resume would load.
			p := filepath.Join(dir, id+".json")
			data, err := os.ReadFile(p)
			must(t, err)
			must(t, os.WriteFile(p, []byte(strings.Replace(string(data), s.Inventory, "/tmp/theirs.yml", 1)), 0o600))
			tt.setup(t, root, dir)

			for _, c := range []struct {
				what, want string
				err        func() error
			}{
				{"Resume", cmp.Or(latest[tt.name], tt.resumErr), func() error {
					got, err := Resume(dir, "", Match{})
					if err == nil && got.Inventory != "/tmp/theirs.yml" {
						t.Errorf("Resume: inventory %q", got.Inventory)
					}
					return err
				}},
				{"Resume ID", tt.resumErr, func() error { _, err := Resume(dir, id, Match{}); return err }},
				// Last: it adds a newer run, which Resume would pick.
				{"Save", tt.saveErr, func() error { return NewState(dir, "20261130T110000Z-bbbbbb", time.Now()).Save() }},
			} {
				err := c.err()
				switch {
				case c.want == "" && err != nil:
					t.Errorf("%s: %v", c.what, err)
				case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
					t.Errorf("%s = %v; want an error with %q", c.what, err, c.want)
				}
			}
			if tt.saveErr != "" {
				if _, err := s.Lock(); err == nil || !strings.Contains(err.Error(), tt.saveErr) {
					t.Errorf("Lock = %v; want an error with %q", err, tt.saveErr)
				}
			}
		})
	}
}

func chmod(rel string, mode os.FileMode) func(*testing.T, string, string) {
	return func(t *testing.T, root, _ string) {
		// os.Chmod takes the sticky bit as os.ModeSticky.
		m := mode.Perm()
		if mode&0o1000 != 0 {
			m |= os.ModeSticky
		}
		must(t, os.Chmod(filepath.Join(root, rel), m))
	}
}

func chown(rel string, uid int) func(*testing.T, string, string) {
	return func(t *testing.T, root, _ string) {
		must(t, os.Chown(filepath.Join(root, rel), uid, uid))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
