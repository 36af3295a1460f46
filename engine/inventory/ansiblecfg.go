package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/internal/syspaths"
)

// AnsibleConfig is what pgtune takes from an ansible.cfg: the settings
// that decide which hosts it works on and how it reaches them.
type AnsibleConfig struct {
	File string
	// Inventory is [defaults] inventory: paths resolved against the
	// file's directory, or a host list.
	Inventory []string
	Forks     int // [defaults] forks; 0 when not set
	// AskPass and BecomeAskPass are [defaults] ask_pass and
	// [privilege_escalation] become_ask_pass: as -k and -K.
	AskPass, BecomeAskPass bool
	Defaults               ConnDefaults
	Warnings               []string
}

// ConnDefaults are connection settings that apply to every host whose
// inventory vars do not set them (ansible.cfg's, below every inventory var).
type ConnDefaults struct {
	User            string // remote_user
	PrivateKeyFile  string // private_key_file
	HostKeyChecking string // host_key_checking = False → "accept-new"
	SSHArgs         string // [ssh_connection] ssh_args: before ansible_ssh_common_args, as Ansible orders them
	File            string // the ansible.cfg, for messages
}

// FindAnsibleConfig finds ansible.cfg where Ansible does, first found
// wins: $ANSIBLE_CONFIG (a file, or a directory holding ansible.cfg),
// ./ansible.cfg (unless the directory is world-writable), ~/.ansible.cfg,
// /etc/ansible/ansible.cfg. nil when there is none.
func FindAnsibleConfig() (*AnsibleConfig, error) {
	var paths, warnings []string
	if env, ok := os.LookupEnv("ANSIBLE_CONFIG"); ok {
		env = expandTilde(env)
		if fi, err := os.Stat(env); err == nil && fi.IsDir() {
			env = filepath.Join(env, "ansible.cfg")
		}
		paths = append(paths, env)
	}
	if cwd, err := os.Getwd(); err == nil {
		cfg := filepath.Join(cwd, "ansible.cfg")
		if fi, err := os.Stat(cwd); err == nil && fi.Mode().Perm()&0o002 != 0 {
			if _, err := os.Stat(cfg); err == nil {
				warnings = append(warnings, fmt.Sprintf("ignoring %s: its directory is world-writable (Ansible ignores it too)", cfg))
			}
		} else {
			paths = append(paths, cfg)
		}
	}
	paths = append(paths, expandTilde("~/.ansible.cfg"), syspaths.AnsibleConfig)
	for _, p := range paths {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			continue
		}
		c, err := LoadAnsibleConfig(p)
		if err != nil {
			return nil, err
		}
		c.Warnings = append(warnings, c.Warnings...)
		return c, nil
	}
	if len(warnings) > 0 {
		return &AnsibleConfig{Warnings: warnings}, nil
	}
	return nil, nil
}

func expandTilde(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}

// LoadAnsibleConfig reads one ansible.cfg.
func LoadAnsibleConfig(path string) (*AnsibleConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ansible.cfg: %w", err)
	}
	sections, err := parseConfigINI(path, string(data))
	if err != nil {
		return nil, err
	}
	c := &AnsibleConfig{File: path, Defaults: ConnDefaults{File: path}}
	dir := filepath.Dir(path)
	get := func(section, key string) (cfgValue, bool) {
		v, ok := sections[section][key]
		return v, ok
	}
	if v, ok := get("defaults", "inventory"); ok {
		for _, s := range strings.Split(v.text, ",") {
			if s = strings.TrimSpace(s); s != "" {
				c.Inventory = append(c.Inventory, resolveCfgPath(dir, s))
			}
		}
	}
	if v, ok := get("defaults", "forks"); ok {
		n, err := strconv.Atoi(v.text)
		if err != nil || n < 1 {
			return nil, v.errAt(path, "forks: expected a positive number, got %q", v.text)
		}
		c.Forks = n
	}
	if v, ok := get("defaults", "remote_user"); ok && v.text != "" {
		c.Defaults.User = v.text
	}
	if v, ok := get("defaults", "private_key_file"); ok && v.text != "" {
		c.Defaults.PrivateKeyFile = resolveCfgPath(dir, v.text)
	}
	if v, ok := get("defaults", "host_key_checking"); ok {
		on, err := parseBecome(v.text)
		if err != nil {
			return nil, v.errAt(path, "host_key_checking: %v", err)
		}
		if !on.(bool) {
			// Ansible then connects whatever the key; pgtune still refuses
			// a key that changed, as with StrictHostKeyChecking=no.
			c.Defaults.HostKeyChecking = "accept-new"
		}
	}
	for _, b := range []struct {
		section, key string
		dst          *bool
	}{{"defaults", "ask_pass", &c.AskPass}, {"privilege_escalation", "become_ask_pass", &c.BecomeAskPass}} {
		if v, ok := get(b.section, b.key); ok {
			on, err := parseBecome(v.text)
			if err != nil {
				return nil, v.errAt(path, "%s: %v", b.key, err)
			}
			*b.dst = on.(bool)
		}
	}
	if v, ok := get("ssh_connection", "ssh_args"); ok {
		if _, err := parseSSHArgs(v.text); err != nil {
			return nil, v.errAt(path, "ssh_args: %v", err)
		}
		c.Defaults.SSHArgs = v.text
	}
	return c, nil
}

// resolveCfgPath expands a path from ansible.cfg as Ansible expands a
// path setting ($VAR and ${VAR} that are set, a leading ~), and makes a
// relative one relative to dir (the file's directory; the working
// directory for an environment variable).
func resolveCfgPath(dir, p string) string {
	p = expandTilde(expandEnv(p))
	if filepath.IsAbs(p) || strings.HasPrefix(p, "~") || strings.Contains(p, ",") {
		return p
	}
	return filepath.Join(dir, p)
}

// envRef is $VAR or ${VAR} in a path.
var envRef = regexp.MustCompile(`\$(\w+|\{\w+\})`)

// expandEnv replaces $VAR and ${VAR} by the variable's value where it is
// set, and leaves anything else exactly as written (Python's expandvars).
func expandEnv(p string) string {
	return envRef.ReplaceAllStringFunc(p, func(ref string) string {
		if v, ok := os.LookupEnv(strings.Trim(ref, "${}")); ok {
			return v
		}
		return ref
	})
}

// WithAnsibleEnv applies over cfg (nil: no ansible.cfg was found) the
// environment variables Ansible reads for connection defaults, which win
// over the file there too: ANSIBLE_REMOTE_USER and
// ANSIBLE_PRIVATE_KEY_FILE (relative to the working directory). Not
// ANSIBLE_INVENTORY (DESIGN: no -i is localhost; a variable exported in
// a shell must not turn `pgtune apply` toward a fleet) nor
// ANSIBLE_HOST_KEY_CHECKING (many CI images export it False: it would
// make every host trust on first use, silently).
func WithAnsibleEnv(cfg *AnsibleConfig) (*AnsibleConfig, error) {
	user := strings.TrimSpace(os.Getenv("ANSIBLE_REMOTE_USER"))
	key := strings.TrimSpace(os.Getenv("ANSIBLE_PRIVATE_KEY_FILE"))
	if user == "" && key == "" {
		return cfg, nil
	}
	if cfg == nil {
		cfg = &AnsibleConfig{File: "the environment"}
	}
	if user != "" {
		cfg.Defaults.User = user
	}
	if key != "" {
		cwd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		cfg.Defaults.PrivateKeyFile = resolveCfgPath(cwd, key)
	}
	return cfg, nil
}

type cfgValue struct {
	text string
	line int
}

func (v cfgValue) errAt(file, format string, args ...any) error {
	return &expr.PosError{File: file, Line: v.line, Msg: fmt.Sprintf(format, args...)}
}

// parseConfigINI reads the INI dialect of Python's configparser as Ansible
// sets it up: [sections], key = value or key: value (keys case-insensitive),
// # and ; comment lines, " ;" inline comments, indented continuation
// lines, %(name)s interpolation and %% for a percent sign. Hand-written:
// the Go INI libraries differ from configparser on exactly these points.
func parseConfigINI(file, data string) (map[string]map[string]cfgValue, error) {
	sections := map[string]map[string]cfgValue{"DEFAULT": {}}
	section, lastKey := "", ""
	for i, raw := range strings.Split(data, "\n") {
		line := strings.TrimRight(raw, " \t\r")
		trimmed := strings.TrimSpace(line)
		errorf := func(format string, args ...any) error {
			return &expr.PosError{File: file, Line: i + 1, Msg: fmt.Sprintf(format, args...)}
		}
		if trimmed == "" || trimmed[0] == '#' || trimmed[0] == ';' {
			lastKey = "" // a blank or comment line ends continuation here
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if lastKey == "" {
				return nil, errorf("unexpected indented line %q", trimmed)
			}
			v := sections[section][lastKey]
			v.text += "\n" + stripInlineComment(trimmed)
			sections[section][lastKey] = v
			continue
		}
		if trimmed[0] == '[' {
			if !strings.HasSuffix(trimmed, "]") {
				return nil, errorf("bad section header %q", trimmed)
			}
			section = trimmed[1 : len(trimmed)-1]
			if sections[section] == nil {
				sections[section] = map[string]cfgValue{}
			}
			lastKey = ""
			continue
		}
		if section == "" {
			return nil, errorf("a setting before any [section]: %q", trimmed)
		}
		k, v, ok := cutAny(trimmed, "=:")
		if !ok {
			return nil, errorf("expected key = value, got %q", trimmed)
		}
		lastKey = strings.ToLower(strings.TrimSpace(k))
		sections[section][lastKey] = cfgValue{text: stripInlineComment(strings.TrimSpace(v)), line: i + 1}
	}
	for name, sec := range sections {
		for k, v := range sec {
			text, err := interpolate(v.text, sec, sections["DEFAULT"], 0)
			if err != nil {
				return nil, v.errAt(file, "%s: %v", k, err)
			}
			v.text = text
			sections[name][k] = v
		}
	}
	return sections, nil
}

func cutAny(s, seps string) (string, string, bool) {
	i := strings.IndexAny(s, seps)
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

func stripInlineComment(s string) string {
	for i := 1; i < len(s); i++ {
		if s[i] == ';' && (s[i-1] == ' ' || s[i-1] == '\t') {
			return strings.TrimSpace(s[:i])
		}
	}
	return s
}

// interpolate expands %(name)s from the section (then DEFAULT) and %%.
func interpolate(s string, sec, defaults map[string]cfgValue, depth int) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	if depth > 10 {
		return "", fmt.Errorf("interpolation nested too deeply")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		rest := s[i+1:]
		switch {
		case strings.HasPrefix(rest, "%"):
			b.WriteByte('%')
			i++
		case strings.HasPrefix(rest, "("):
			end := strings.Index(rest, ")s")
			if end < 0 {
				return "", fmt.Errorf("bad interpolation in %q", s)
			}
			name := strings.ToLower(rest[1:end])
			v, ok := sec[name]
			if !ok {
				v, ok = defaults[name]
			}
			if !ok {
				return "", fmt.Errorf("%%(%s)s names no setting", name)
			}
			sub, err := interpolate(v.text, sec, defaults, depth+1)
			if err != nil {
				return "", err
			}
			b.WriteString(sub)
			i += end + 2
		default:
			return "", fmt.Errorf("a lone %% in %q (write %%%% for a percent sign)", s)
		}
	}
	return b.String(), nil
}
