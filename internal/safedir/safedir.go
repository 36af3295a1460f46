// Package safedir holds the rule a controller-side directory is trusted
// by: every level of its real path belongs to root or the user and no one
// else may write it (a sticky level above, like /tmp, excepted). The run
// state directory is checked by it (engine/rollout), and the tests pick
// their scratch directories by it (internal/testenv).
package safedir

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Why says why a level of a trusted directory's path is not safe ("" when
// it is) for user me; last is the directory itself, which must be the
// user's and writable by no one else, sticky or not.
func Why(fi fs.FileInfo, me int, last bool) string {
	if !fi.IsDir() {
		return fmt.Sprintf("is not a directory (%v)", fi.Mode().Type())
	}
	uid := Owner(fi)
	mode := fi.Mode()
	switch {
	case last && uid != me:
		return fmt.Sprintf("is owned by uid %d, not you (uid %d)", uid, me)
	case uid != 0 && uid != me:
		return fmt.Sprintf("is owned by uid %d, neither you (uid %d) nor root", uid, me)
	case mode.Perm()&0o022 != 0 && (last || mode&fs.ModeSticky == 0):
		return fmt.Sprintf("is writable by group or others (mode %04o)", Mode(mode))
	}
	return ""
}

// Levels are p and the directories above it, outermost (/) first.
func Levels(p string) []string {
	var levels []string
	for ; ; p = filepath.Dir(p) {
		levels = append([]string{p}, levels...)
		if p == filepath.Dir(p) {
			return levels
		}
	}
}

// Above checks dir as a level above a trusted directory: every level of
// its real path, dir's own included, by Why with last false. It returns
// the first level at fault and why ("" when none is).
func Above(dir string) (level, why string, err error) {
	real, err := filepath.EvalSymlinks(dir)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return "", "", err
	}
	for _, p := range Levels(real) {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", "", err
		}
		if why := Why(fi, os.Getuid(), false); why != "" {
			return p, why, nil
		}
	}
	return "", "", nil
}

// Owner is the file's owner (-1 when the system does not say).
func Owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// Mode is the mode as chmod takes it and ls shows it: the setuid, setgid
// and sticky bits included (a volume mounted with a Kubernetes fsGroup is
// 2775, not 0775).
func Mode(m fs.FileMode) uint32 {
	b := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}
