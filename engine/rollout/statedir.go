package rollout

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The run state directory is trusted as the user's own: a resume takes the
// inventory (ssh_config_file, pg_restart, …) from it. Whoever else could
// write there could run commands on the controller and, through the
// hosts' pg_restart, as root on the fleet. XDG_STATE_HOME may point
// somewhere shared (CI images put it under /tmp), so the directory is
// checked before each use, as the hosts' state directory is (SECURITY.md),
// with the running user in root's place.

// secureDir checks run state directory dir and returns its real path (its
// symbolic links resolved), which the caller then works in: a link that
// someone else may change after the check is never followed again. With
// create, missing levels are made 0700. Without it, a missing directory
// is an error that wraps fs.ErrNotExist.
//
// Every level of the real path must be a directory owned by root or the
// user, and writable by group or others only when sticky (/tmp): nobody
// else can rename a level away and put their own in its place. The state
// directory itself must be the user's and writable by no one else.
func secureDir(dir string, create bool) (string, error) {
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("run state: %w", err)
		}
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("run state: %w", err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return "", fmt.Errorf("run state: %w", err)
	}
	var levels []string
	for p := real; ; p = filepath.Dir(p) {
		levels = append([]string{p}, levels...)
		if p == filepath.Dir(p) {
			break
		}
	}
	me := os.Getuid()
	for i, p := range levels {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("run state: %w", err)
		}
		if why := unsafeLevel(fi, me, i == len(levels)-1); why != "" {
			return "", fmt.Errorf("run state directory %s: %s %s: refusing to use it (another user could change the run state, and a resume would take its inventory): make it yours, mode 0700, or point XDG_STATE_HOME elsewhere", dir, p, why)
		}
	}
	return real, nil
}

// unsafeLevel says why a level of the state directory's path is not safe
// ("" when it is); last is the state directory itself.
func unsafeLevel(fi fs.FileInfo, me int, last bool) string {
	if !fi.IsDir() {
		return fmt.Sprintf("is not a directory (%v)", fi.Mode().Type())
	}
	uid := owner(fi)
	mode := fi.Mode()
	switch {
	case last && uid != me:
		return fmt.Sprintf("is owned by uid %d, not you (uid %d)", uid, me)
	case uid != 0 && uid != me:
		return fmt.Sprintf("is owned by uid %d, neither you (uid %d) nor root", uid, me)
	case mode.Perm()&0o022 != 0 && (last || mode&fs.ModeSticky == 0):
		return fmt.Sprintf("is writable by group or others (mode %04o)", modeBits(mode))
	}
	return ""
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
		switch uid := owner(fi); {
		case !fi.Mode().IsRegular():
			err = fmt.Errorf("run state %s: not a regular file (%v)", p, fi.Mode().Type())
		case uid != os.Getuid() || fi.Mode().Perm()&0o022 != 0:
			err = fmt.Errorf("run state %s: owned by uid %d, mode %04o: it must be yours and writable by no one else", p, uid, modeBits(fi.Mode()))
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// modeBits is the mode as chmod takes it (sticky bit included).
func modeBits(m fs.FileMode) uint32 {
	b := uint32(m.Perm())
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
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
