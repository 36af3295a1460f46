package transport

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kevinburke/ssh_config"
)

// systemSSHConfig is the system-wide ssh_config, read after the user's
// ~/.ssh/config when no ssh_config_file is named (a variable for tests).
var systemSSHConfig = "/etc/ssh/ssh_config"

// sshConfigFile is the ssh_config a host is resolved with: one file named
// by ssh_config_file, or else the user's and the system's, in the order
// ssh(1) reads them, so the first value obtained wins across both.
type sshConfigFile struct {
	path    string // the files read, for messages
	layers  []configLayer
	matches []matchBlock // Match host blocks, in every file and every file they include
}

type configLayer struct {
	path string
	cfg  *ssh_config.Config
}

// matchBlock is a `Match host …` line. ssh(1) tests it against the
// HostName; the parser tests it against the name given. pgtune uses it
// only for hosts where both agree.
type matchBlock struct {
	file string
	line int
	text string
	host *ssh_config.Host
}

// loadSSHConfigs reads explicit (which must exist) or, when it is empty,
// ~/.ssh/config and the system's ssh_config (either may be missing).
func loadSSHConfigs(explicit, home string) (*sshConfigFile, error) {
	f := &sshConfigFile{}
	if explicit != "" {
		if err := f.add(explicit, home, false, true); err != nil {
			return nil, err
		}
	} else {
		if home != "" {
			if err := f.add(filepath.Join(home, ".ssh", "config"), home, false, false); err != nil {
				return nil, err
			}
		}
		if systemSSHConfig != "" {
			if err := f.add(systemSSHConfig, home, true, false); err != nil {
				return nil, err
			}
		}
	}
	var names []string
	for _, l := range f.layers {
		names = append(names, l.path)
	}
	f.path = strings.Join(names, ", ")
	if f.path == "" {
		f.path = "(none)"
	}
	return f, nil
}

// add parses one file and appends it as the next layer.
func (f *sshConfigFile) add(path, home string, system, required bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		if !required && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("ssh_config: %w", err)
	}
	base := filepath.Join(home, ".ssh")
	if system {
		base = filepath.Dir(systemSSHConfig)
	}
	data = absoluteIncludes(data, base, home)
	cfg, err := ssh_config.DecodeBytes(data)
	if err != nil {
		return fmt.Errorf("ssh_config %s: %w", path, err)
	}
	f.layers = append(f.layers, configLayer{path: path, cfg: cfg})
	return f.scanMatches(path, data, base, home, 0)
}

// directive splits an ssh_config line into its lower-case keyword and its
// arguments ("Key value", "Key=value"); "" for blank lines and comments.
func directive(line string) (string, []string) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return "", nil
	}
	i := strings.IndexAny(line, " \t=")
	if i < 0 {
		return strings.ToLower(line), nil
	}
	rest := strings.TrimLeft(line[i:], " \t")
	rest = strings.TrimLeft(strings.TrimPrefix(rest, "="), " \t")
	return strings.ToLower(line[:i]), strings.Fields(rest)
}

// absoluteIncludes rewrites relative Include arguments the way ssh(1)
// resolves them (against ~/.ssh for user files, /etc/ssh for the system
// file) with the home pgtune uses, so the parser does not resolve them
// against another one.
func absoluteIncludes(data []byte, base, home string) []byte {
	lines := strings.Split(string(data), "\n")
	changed := false
	for i, line := range lines {
		key, args := directive(line)
		if key != "include" {
			continue
		}
		for j, a := range args {
			args[j] = includePath(strings.Trim(a, `"`), base, home)
		}
		lines[i] = "Include " + strings.Join(args, " ")
		changed = true
	}
	if !changed {
		return data
	}
	return []byte(strings.Join(lines, "\n"))
}

func includePath(p, base, home string) string {
	switch {
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(home, p[2:])
	case filepath.IsAbs(p):
		return p
	}
	return filepath.Join(base, p)
}

// maxIncludeDepth is the parser's own limit on nested Include.
const maxIncludeDepth = 5

// scanMatches records the Match host blocks of data and of every file it
// includes (the parser keeps included files out of reach).
func (f *sshConfigFile) scanMatches(path string, data []byte, base, home string, depth int) error {
	if depth > maxIncludeDepth {
		return nil
	}
	for n, line := range strings.Split(string(data), "\n") {
		key, args := directive(line)
		switch key {
		case "match":
			if len(args) == 0 || !strings.EqualFold(args[0], "host") {
				continue // "all"; other criteria the parser refused already
			}
			h := &ssh_config.Host{}
			for _, a := range args[1:] {
				for _, one := range strings.Split(a, ",") {
					pat, err := ssh_config.NewPattern(one)
					if err != nil {
						return fmt.Errorf("ssh_config %s line %d: %w", path, n+1, err)
					}
					h.Patterns = append(h.Patterns, pat)
				}
			}
			f.matches = append(f.matches, matchBlock{file: path, line: n + 1, text: strings.TrimSpace(line), host: h})
		case "include":
			for _, a := range args {
				files, _ := filepath.Glob(includePath(strings.Trim(a, `"`), base, home))
				for _, inc := range files {
					b, err := os.ReadFile(inc)
					if err != nil {
						continue
					}
					if err := f.scanMatches(inc, b, base, home, depth+1); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// checkMatches refuses a host for which a Match host block would apply
// differently in ssh(1) (tested against hostName) than in the parser
// (tested against alias): pgtune would resolve it otherwise than ssh.
func (f *sshConfigFile) checkMatches(alias, hostName string) error {
	for _, m := range f.matches {
		if m.host.Matches(alias) != m.host.Matches(hostName) {
			return fmt.Errorf("ssh_config %s line %d: %q is not supported by pgtune for host %s: ssh(1) tests it against the HostName %s, pgtune against the name %s, and they disagree (use Host blocks)",
				m.file, m.line, m.text, alias, hostName, alias)
		}
	}
	return nil
}
