package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pgtune/pgtune/internal/mask"
)

// configPresets are the settings fixed before the ssh_config is read, as
// ssh(1)'s command line fixes them (-l user, -p port): the inventory's.
// Match user sees them. The inventory's address is no preset: it is the
// name ssh is given (see sshName).
type configPresets struct {
	user string
	port int
}

// hostOptions is what the ssh_config gives one host: per lower-case key,
// the values obtained in order (the first wins; a few keys accumulate).
type hostOptions struct {
	values map[string][]optionValue
	err    error
}

type optionValue struct {
	value string
	file  string
}

// accumulates are the keys every matching line adds to, in order.
var accumulates = map[string]bool{"identityfile": true, "certificatefile": true, "localforward": true,
	"remoteforward": true, "dynamicforward": true, "sendenv": true}

func (o *hostOptions) first(key string) (optionValue, bool) {
	if vs := o.values[strings.ToLower(key)]; len(vs) > 0 {
		return vs[0], true
	}
	return optionValue{}, false
}

// get returns the first value for key obtained for alias, as ssh(1)
// does (the user's file before the system's), unquoted.
func (f *sshConfigFile) get(alias, key string) string {
	v, _ := f.lookup(alias, key)
	return v
}

// lookup is get with the file the value came from.
func (f *sshConfigFile) lookup(alias, key string) (string, string) {
	if f == nil {
		return "", ""
	}
	if v, ok := f.options(alias).first(key); ok {
		return unquote(v.value), v.file
	}
	return "", ""
}

// getAll returns every value for key (IdentityFile accumulates), in order.
func (f *sshConfigFile) getAll(alias, key string) []string {
	if f == nil {
		return nil
	}
	var out []string
	for _, v := range f.options(alias).values[strings.ToLower(key)] {
		out = append(out, unquote(v.value))
	}
	return out
}

// evaluate reads the files for alias with p fixed beforehand and keeps
// the result for get, lookup and getAll; an error (a Match criterion
// pgtune does not honour, a Match exec that cannot run, a bad line) fails
// the host, naming the file and line.
func (f *sshConfigFile) evaluate(alias string, p configPresets) error {
	if f == nil {
		return nil
	}
	if _, done := f.hosts[alias]; !done || f.presets[alias] != p {
		f.presets[alias] = p
		f.hosts[alias] = f.evaluateHost(alias, p)
	}
	return f.hosts[alias].err
}

// options is alias's evaluation (without presets when evaluate was not
// called for it).
func (f *sshConfigFile) options(alias string) *hostOptions {
	if _, done := f.hosts[alias]; !done {
		_ = f.evaluate(alias, configPresets{})
	}
	return f.hosts[alias]
}

// configPass is one reading of the files for one host, ssh(1)'s
// process_config_files: lines apply while the last Host or Match line
// matched.
type configPass struct {
	f        *sshConfigFile
	alias    string // the host as given (%n, Match originalhost)
	host     string // what Host lines match: alias, or the HostName in the final pass
	final    bool
	presets  configPresets
	opts     *hostOptions
	local    localIdentity
	wantLast bool // a Match final asks for the final pass
}

func (f *sshConfigFile) evaluateHost(alias string, p configPresets) *hostOptions {
	opts := &hostOptions{values: map[string][]optionValue{}}
	pass := &configPass{f: f, alias: alias, host: alias, presets: p, opts: opts, local: f.local}
	if opts.err = pass.run(); opts.err != nil || !pass.wantLast {
		return opts
	}
	// The final pass: Host lines and Match host now see the HostName.
	pass.final, pass.host = true, pass.hostName()
	opts.err = pass.run()
	return opts
}

func (c *configPass) run() error {
	for _, s := range c.f.files {
		base := filepath.Join(c.f.home, ".ssh")
		if s.system {
			base = filepath.Dir(s.path)
		}
		active := true
		if err := c.file(s.path, base, &active, false, s.private, 0); err != nil {
			return err
		}
	}
	return nil
}

// file applies one file's lines; active is shared with the including
// file, and restored by it after each Include. In a file included from a
// block that did not match (parseOnly), no Host or Match line matches.
func (c *configPass) file(path, base string, active *bool, parseOnly, private bool, depth int) error {
	if depth > maxIncludeDepth {
		return fmt.Errorf("ssh_config %s: too many nested Include (more than %d)", path, maxIncludeDepth)
	}
	lines, err := readConfigLines(path, private)
	if err != nil {
		return err
	}
	for _, l := range lines {
		switch l.key {
		case "host":
			*active = !parseOnly && c.hostMatches(l.args)
		case "match":
			m, err := c.match(l)
			if err != nil {
				return err
			}
			*active = !parseOnly && m
		case "include":
			if err := c.include(l, base, active, parseOnly, private, depth); err != nil {
				return err
			}
		default:
			if *active {
				c.set(l)
			}
		}
	}
	return nil
}

func (c *configPass) include(l configLine, base string, active *bool, parseOnly, private bool, depth int) error {
	was := *active
	for _, a := range l.args {
		files, err := filepath.Glob(includePath(a, base, c.f.home))
		if err != nil {
			return fmt.Errorf("%s: Include %s: %v", l.where(), a, err)
		}
		for _, inc := range files {
			if err := c.file(inc, base, active, parseOnly || !was, private, depth+1); err != nil {
				return err
			}
			*active = was
		}
	}
	return nil
}

// set records a directive's value unless the key already has one.
func (c *configPass) set(l configLine) {
	if len(c.opts.values[l.key]) > 0 && !accumulates[l.key] {
		return
	}
	v := l.raw
	if accumulates[l.key] && len(l.args) > 0 {
		v = l.args[0]
	}
	c.opts.values[l.key] = append(c.opts.values[l.key], optionValue{value: v, file: l.file})
}

// hostMatches is a Host line: some pattern matches and no negated one.
func (c *configPass) hostMatches(patterns []string) bool {
	matched := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		if globMatch(strings.TrimPrefix(p, "!"), c.host) {
			if neg {
				return false
			}
			matched = true
		}
	}
	return matched
}

// hostName is what Match host tests: the HostName obtained so far (%h
// expanded), else the host as given; in the final pass, the HostName
// found by the first.
func (c *configPass) hostName() string {
	if c.final {
		return c.host
	}
	if v, ok := c.opts.first("hostname"); ok {
		return strings.ReplaceAll(unquote(v.value), "%h", c.alias)
	}
	return c.alias
}

// remoteUser is what Match user tests: the User obtained so far, else
// the local user.
func (c *configPass) remoteUser() string {
	if c.presets.user != "" {
		return c.presets.user
	}
	if v, ok := c.opts.first("user"); ok {
		return unquote(v.value)
	}
	return c.local.user
}

func (c *configPass) port() string {
	if c.presets.port != 0 {
		return strconv.Itoa(c.presets.port)
	}
	if v, ok := c.opts.first("port"); ok {
		return unquote(v.value)
	}
	return "22"
}

// match evaluates a Match line's criteria, all of which must hold; a
// criterion written !criterion holds when it does not.
func (c *configPass) match(l configLine) (bool, error) {
	args := l.args
	if len(args) == 0 {
		return false, fmt.Errorf("%s: Match needs at least one criterion", l.where())
	}
	result, criteria := true, 0
	for i := 0; i < len(args); i++ {
		name := strings.ToLower(strings.TrimPrefix(args[i], "!"))
		negate := strings.HasPrefix(args[i], "!")
		var ok bool
		switch name {
		case "all":
			if criteria > 1 || i+1 < len(args) {
				return false, fmt.Errorf("%s: Match all cannot be combined with other criteria (except canonical or final before it)", l.where())
			}
			return result && !negate, nil
		case "canonical", "final":
			criteria++
			if name == "final" && !negate {
				c.wantLast = true
			}
			ok = c.final
		case "host", "originalhost", "user", "localuser", "exec":
			criteria++
			if i+1 >= len(args) {
				return false, fmt.Errorf("%s: Match %s needs an argument", l.where(), name)
			}
			i++
			var err error
			if ok, err = c.criterion(l, name, args[i], result); err != nil {
				return false, err
			}
		default:
			return false, fmt.Errorf("%s: Match %s is not supported by pgtune (it honours all, canonical, final, host, originalhost, user, localuser and exec); use Host blocks for this host", l.where(), name)
		}
		if ok == negate {
			result = false
		}
	}
	return result, nil
}

// criterion tests one Match criterion with its argument. exec only runs
// while every criterion before it held, as in ssh(1).
func (c *configPass) criterion(l configLine, name, arg string, soFar bool) (bool, error) {
	switch name {
	case "host":
		return patternList(asciiLower(c.hostName()), arg, true), nil
	case "originalhost":
		return patternList(asciiLower(c.alias), arg, true), nil
	case "user":
		return patternList(c.remoteUser(), arg, false), nil
	case "localuser":
		return patternList(c.local.user, arg, false), nil
	}
	if !soFar {
		return false, nil
	}
	cmd, err := c.execCommand(arg)
	if err != nil {
		return false, fmt.Errorf("%s: Match exec %q: %v", l.where(), mask.Text(arg), err)
	}
	run := c.f.runExec
	if run == nil {
		run = execMatch
	}
	ok, err := run(cmd)
	if err != nil {
		return false, fmt.Errorf("%s: Match exec %q: %v", l.where(), mask.Text(cmd), mask.Text(err.Error()))
	}
	return ok, nil
}

// execCommand expands the tokens ssh(1) expands in Match exec.
func (c *configPass) execCommand(arg string) (string, error) {
	thisHost, _ := os.Hostname()
	short, _, _ := strings.Cut(thisHost, ".")
	var unsafe error
	out, ok, bad := expandTokens(arg, safeNameTokens(func(t byte) (string, bool) {
		switch t {
		case '%':
			return "%", true
		case 'h':
			return c.hostName(), true
		case 'n':
			return c.alias, true
		case 'p':
			return c.port(), true
		case 'r':
			return c.remoteUser(), true
		case 'u':
			return c.local.user, true
		case 'd':
			return c.local.home, true
		case 'i':
			return strconv.Itoa(os.Getuid()), true
		case 'l':
			return thisHost, true
		case 'L':
			return short, true
		case 'k':
			if v, ok := c.opts.first("hostkeyalias"); ok {
				return unquote(v.value), true
			}
			return c.hostName(), true
		case 'j':
			if v, ok := c.opts.first("proxyjump"); ok && !strings.EqualFold(unquote(v.value), "none") {
				return unquote(v.value), true
			}
			return "", true
		}
		return "", false
	}, &unsafe), false)
	switch {
	case ok && unsafe != nil:
		return "", unsafe
	case ok:
		return out, nil
	case bad == 0:
		return "", errors.New("lone % at the end")
	}
	return "", fmt.Errorf("token %%%c is not supported by pgtune (use %%h %%n %%p %%r %%u %%d %%i %%l %%L %%k %%j %%%%)", bad)
}

// execTimeout bounds a Match exec command: ssh(1) waits for ever, pgtune
// fails the host rather than hang the run.
var execTimeout = time.Minute

// execMatch runs a Match exec command as ssh(1) does, with the user's
// shell ($SHELL, else /bin/sh), stdin and stdout on /dev/null: it matches
// when the command exits 0.
func execMatch(cmd string) (bool, error) {
	shell := os.Getenv("SHELL")
	if shell == "" {
		shell = "/bin/sh"
	}
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, shell, "-c", cmd)
	var stderr strings.Builder
	c.Stderr = &stderr
	// A background child holding stderr open must not keep the run
	// waiting once the command itself is done (or killed).
	c.WaitDelay = time.Second
	err := c.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() != nil:
		return false, fmt.Errorf("did not finish within %s", execTimeout)
	case errors.As(err, &exit) && exit.Exited():
		return false, nil
	}
	msg := strings.TrimSpace(stderr.String())
	if msg != "" {
		return false, fmt.Errorf("%v: %s", err, msg)
	}
	return false, err
}

// patternList is ssh(1)'s pattern list: comma-separated patterns with *
// and ?, each negated by a leading !; it matches when some pattern does
// and no negated one does. Host names compare case-insensitively.
func patternList(s, list string, fold bool) bool {
	matched := false
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		if fold {
			p = asciiLower(p)
		}
		if globMatch(p, s) {
			if neg {
				return false
			}
			matched = true
		}
	}
	return matched
}

// globMatch matches s against a pattern of * (any run) and ? (one
// character); everything else is literal.
func globMatch(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for len(pattern) > 0 && pattern[0] == '*' {
				pattern = pattern[1:]
			}
			if pattern == "" {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatch(pattern, s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		default:
			if s == "" || s[0] != pattern[0] {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		}
	}
	return s == ""
}
