package transport

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pgtune/pgtune/internal/syspaths"
)

// sshConfigFile is the ssh_config a host is resolved with: one file named
// by ssh_config_file, or else the user's and the system's, in the order
// ssh(1) reads them, so the first value obtained wins across both.
//
// The files are evaluated the way ssh(1) evaluates them, line by line for
// one host at a time (sshconfig_eval.go), not looked up key by key: a
// Match line's outcome depends on what the lines before it set (Match host
// tests the HostName obtained so far, Match user the User), Match exec
// runs a command, and Match final asks for a second pass. A key-by-key
// lookup library (kevinburke/ssh_config, used before) cannot express that
// and refuses Match exec and Match user, so this package reads the files
// itself.
type sshConfigFile struct {
	path  string // the files read, for messages
	home  string
	local localIdentity // who runs pgtune: Match localuser, %u, %d
	files []configSource
	// hosts caches each alias's evaluation; presets are what the
	// inventory fixed for it before the files are read (as ssh's -l, -p).
	hosts   map[string]*hostOptions
	presets map[string]configPresets
	// runExec runs a Match exec command (nil: execMatch).
	runExec func(cmd string) (bool, error)
}

// configSource is one top-level file, with how its relative Include
// arguments resolve.
type configSource struct {
	path   string
	system bool // the system file: relative includes under its directory
	// private: the user's own ~/.ssh/config, whose owner and mode are
	// checked (with every file it includes) before a line of it is used,
	// as ssh(1) checks them: it can run commands (Match exec,
	// ProxyCommand) as the operator.
	private bool
}

// loadSSHConfigs finds explicit (which must exist) or, when it is empty,
// ~/.ssh/config and the system's ssh_config (either may be missing). The
// files are read when a host is evaluated.
func loadSSHConfigs(explicit, home string) (*sshConfigFile, error) {
	f := &sshConfigFile{home: home, hosts: map[string]*hostOptions{}, presets: map[string]configPresets{}}
	add := func(path string, system, private, required bool) error {
		if _, err := os.Stat(path); err != nil {
			if !required && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("ssh_config: %w", err)
		}
		f.files = append(f.files, configSource{path: path, system: system, private: private})
		return nil
	}
	var err error
	if explicit != "" {
		err = add(explicit, false, false, true)
	} else {
		if home != "" {
			err = add(filepath.Join(home, ".ssh", "config"), false, true, false)
		}
		if err == nil && syspaths.SSHConfig != "" {
			err = add(syspaths.SSHConfig, true, false, false)
		}
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range f.files {
		names = append(names, s.path)
	}
	f.path = strings.Join(names, ", ")
	if f.path == "" {
		f.path = "(none)"
	}
	// Every file must parse, whichever host is asked about: a syntax
	// error is an error for all of them, as in ssh(1).
	for _, s := range f.files {
		if _, err := readConfigLines(s.path, s.private); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// configLine is one directive of an ssh_config file.
type configLine struct {
	file string
	num  int
	key  string   // lower case
	raw  string   // the arguments as written, a trailing comment removed
	args []string // the arguments split as ssh(1) splits them, quotes removed
}

func (l configLine) where() string { return fmt.Sprintf("ssh_config %s line %d", l.file, l.num) }

// commandKeys take the rest of the line as written, comments included
// (ssh(1) hands it to the shell).
var commandKeys = map[string]bool{"proxycommand": true, "localcommand": true, "remotecommand": true, "knownhostscommand": true}

// readConfigLines reads one file's directives; private: the file must
// pass ssh(1)'s owner and mode check first.
func readConfigLines(path string, private bool) ([]configLine, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ssh_config: %w", err)
	}
	if private {
		if err := checkPrivateConfig(path); err != nil {
			return nil, err
		}
	}
	var out []configLine
	for n, text := range strings.Split(string(data), "\n") {
		key, rest := directive(text)
		if key == "" {
			continue
		}
		l := configLine{file: path, num: n + 1, key: key, raw: rest}
		if !commandKeys[key] {
			words, cut, err := splitConfigArgs(rest)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", l.where(), err)
			}
			l.args, l.raw = words, strings.TrimSpace(rest[:cut])
		}
		out = append(out, l)
	}
	return out, nil
}

// directive splits an ssh_config line into its lower-case keyword and the
// rest ("Key value", "Key=value", "Key = value"); "" for blank lines and
// comments.
func directive(line string) (string, string) {
	line = strings.TrimSpace(strings.TrimRight(line, "\r\f"))
	if line == "" || line[0] == '#' {
		return "", ""
	}
	i := strings.IndexAny(line, " \t=")
	if i < 0 {
		return strings.ToLower(line), ""
	}
	rest := strings.TrimLeft(line[i:], " \t")
	rest = strings.TrimLeft(strings.TrimPrefix(rest, "="), " \t")
	return strings.ToLower(line[:i]), rest
}

// splitConfigArgs splits arguments at unquoted white space, removing
// double and single quotes, up to a word that starts with # (a comment).
// It returns the words and where the comment starts in s.
func splitConfigArgs(s string) ([]string, int, error) {
	var out []string
	var cur strings.Builder
	have := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			quote, have = c, true
		case c == ' ' || c == '\t':
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		case c == '#' && !have:
			return out, i, nil
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if quote != 0 {
		return nil, 0, fmt.Errorf("unterminated %c quote", quote)
	}
	if have {
		out = append(out, cur.String())
	}
	return out, len(s), nil
}

// includePath is where an Include argument points: ~/ under home, a
// relative path under base (~/.ssh for the user's files, /etc/ssh for the
// system's), as ssh(1) resolves them.
func includePath(p, base, home string) string {
	switch {
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(home, p[2:])
	case filepath.IsAbs(p):
		return p
	}
	return filepath.Join(base, p)
}

// maxIncludeDepth is ssh(1)'s limit on nested Include.
const maxIncludeDepth = 16

// checkPrivateConfig refuses a user ssh_config (or a file it includes)
// that someone other than the operator or root owns or may write, as
// ssh(1) does ("Bad owner or permissions"): its Match exec and
// ProxyCommand lines run as the operator.
func checkPrivateConfig(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("ssh_config: %w", err)
	}
	uid := -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid = int(st.Uid)
	}
	if (uid != 0 && uid != os.Getuid()) || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("ssh_config %s: bad owner or permissions (owner uid %d, mode %v): it must be owned by you or root and writable by no one else, as ssh(1) requires", path, uid, fi.Mode().Perm())
	}
	return nil
}
