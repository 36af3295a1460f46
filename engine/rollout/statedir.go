package rollout

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pgtune/pgtune/internal/safedir"
)

// The run state directory is trusted as the user's own: a resume takes the
// inventory (ssh_config_file, pg_restart, …) from it. Whoever else could
// write there could run commands on the controller and, through the
// hosts' pg_restart, as root on the fleet. XDG_STATE_HOME may point
// somewhere shared (CI images put it under /tmp), so the directory is
// checked before each use, as the hosts' state directory is (SECURITY.md),
// with the running user in root's place.

// What may be done with a run state directory is decided here, and only
// here: reading a state back (a resume, the runs it picks from) needs a
// directory nobody else could have changed, and is refused otherwise
// (secureDir's *UnsafeDirError); writing one is only worth it when it can
// be read back, so a new apply in such a directory keeps its state in
// memory instead (State.Prepare) and says so. So no apply is refused over
// its run state: container and CI setups (a Kubernetes emptyDir, an
// fsGroup volume, a HOME owned by another uid) apply, without --resume.

// UnsafeDirError says which level of a run state directory's path others
// could change, and how to fix it.
type UnsafeDirError struct {
	Dir   string // the state directory
	Level string // the first level at fault, from / down
	Why   string
	// Last: Level is the state directory itself; otherwise a level above
	// it (or one it would be made under).
	Last bool
	// Unmade is set when a missing level could not be made at all (a
	// read-only root file system in a container, a HOME=/ it may not
	// write): nothing unsafe, but no state can be kept either.
	Unmade error
}

// Error is the refusal of a resume.
func (e *UnsafeDirError) Error() string {
	return fmt.Sprintf("run state directory %s: %s %s: refusing to read a run state from it (another user could have changed it, and a resume takes its inventory): %s", e.Dir, e.Level, e.Why, e.Fix())
}

// Warning is what a new apply in the directory says: it goes on, without
// a run state.
func (e *UnsafeDirError) Warning() string {
	if e.Unmade != nil {
		return fmt.Sprintf("run state directory %s: %v: this run keeps no run state, so it cannot be resumed with --resume; to keep one, set XDG_STATE_HOME to a writable directory of yours", e.Dir, e.Unmade)
	}
	return fmt.Sprintf("run state directory %s: %s %s: this run keeps no run state (another user could change it, and a resume would take its inventory), so it cannot be resumed with --resume; to keep one: %s", e.Dir, e.Level, e.Why, e.Fix())
}

// Fix is how to make the directory safe, for the level at fault: never
// "take it over", as the level may be another user's home.
func (e *UnsafeDirError) Fix() string {
	elsewhere := "set XDG_STATE_HOME to a directory of yours that only you can write, on a path whose every level is yours or root's and not writable by others (sticky, like /tmp, is fine above it)"
	switch {
	case !strings.HasPrefix(e.Why, "is writable"):
		return elsewhere
	case e.Last:
		return fmt.Sprintf("chmod go-w %s, or %s", e.Level, elsewhere)
	default:
		return fmt.Sprintf("chmod +t %s (as /tmp: others may then remove only their own entries) or chmod go-w %s, or %s", e.Level, e.Level, elsewhere)
	}
}

// Prepare readies the state directory of a new run: checked, and made
// when missing (secureDir). In a directory others could change (or one
// that would have to be made under such a level) the run still goes on,
// but keeps its state in memory only (Kept is false): a state there could
// not be trusted by a resume (statedir.go). unsafe says why, for the
// warning; err is any other failure.
func (s *State) Prepare() (unsafe *UnsafeDirError, err error) {
	_, err = secureDir(filepath.Dir(s.path), true)
	if errors.As(err, &unsafe) {
		s.unkept = true
		return unsafe, nil
	}
	return nil, err
}

// secureDir checks run state directory dir and returns its real path (its
// symbolic links resolved), which the caller then works in: a link that
// someone else may change after the check is never followed again. With
// create, missing levels are made 0700, one at a time, each only under a
// level that passed and checked itself once made: nothing is made (as
// root, in another user's home, through their links) before the path to
// it is known safe. Without create, a missing directory is an error that
// wraps fs.ErrNotExist.
//
// Every level of the real path must be a directory owned by root or the
// user, and writable by group or others only when sticky (/tmp): nobody
// else can rename a level away and put their own in its place. The state
// directory itself must be the user's and writable by no one else. A level
// that is not is an *UnsafeDirError.
func secureDir(dir string, create bool) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("run state: %w", err)
	}
	// The deepest level there is, and the names to make below it.
	top, missing := abs, []string(nil)
	for {
		_, err := os.Lstat(top)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || top == filepath.Dir(top) {
			return "", fmt.Errorf("run state: %w", err)
		}
		missing = append([]string{filepath.Base(top)}, missing...)
		top = filepath.Dir(top)
	}
	real, err := filepath.EvalSymlinks(top)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return "", fmt.Errorf("run state: %w", err)
	}
	me := os.Getuid()
	levels := safedir.Levels(real)
	for i, p := range levels {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("run state: %w", err)
		}
		last := len(missing) == 0 && i == len(levels)-1
		if why := safedir.Why(fi, me, last); why != "" {
			return "", &UnsafeDirError{Dir: dir, Level: p, Why: why, Last: last}
		}
	}
	if len(missing) > 0 && !create {
		return "", fmt.Errorf("run state: %w", &fs.PathError{Op: "stat", Path: abs, Err: fs.ErrNotExist})
	}
	for i, name := range missing {
		p := filepath.Join(real, name)
		// Made by someone else meanwhile: checked as any level is (a
		// link is no directory).
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			if errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission) {
				return "", &UnsafeDirError{Dir: dir, Level: p, Why: "cannot be made", Unmade: err}
			}
			return "", fmt.Errorf("run state: %w", err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("run state: %w", err)
		}
		last := i == len(missing)-1
		if why := safedir.Why(fi, me, last); why != "" {
			return "", &UnsafeDirError{Dir: dir, Level: p, Why: why, Last: last}
		}
		real = p
	}
	return real, nil
}

// openState opens a state or lock file in a checked directory without
// following a symbolic link, and refuses one someone else owns or may
// write.
func openState(p string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(p, flag|syscall.O_NOFOLLOW, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("run state %s: a symbolic link: refusing to follow it", p)
	}
	if err != nil {
		return nil, fmt.Errorf("run state: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		switch uid := safedir.Owner(fi); {
		case !fi.Mode().IsRegular():
			err = fmt.Errorf("run state %s: not a regular file (%v)", p, fi.Mode().Type())
		case uid != os.Getuid() || fi.Mode().Perm()&0o022 != 0:
			err = fmt.Errorf("run state %s: owned by uid %d, mode %04o: it must be yours and writable by no one else", p, uid, safedir.Mode(fi.Mode()))
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// readState reads file name of checked state directory dir.
func readState(dir, name string) ([]byte, error) {
	real, err := secureDir(dir, false)
	if err != nil {
		return nil, err
	}
	f, err := openState(filepath.Join(real, name), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("run state: %w", err)
	}
	return data, nil
}
