package pgconf

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine/facts"
)

// This file reads PostgreSQL's configuration the way the server does:
// postgresql.conf, then what its include / include_if_exists / include_dir
// directives pull in at the point where they appear, then
// postgresql.auto.conf in the data directory; for each name the last
// assignment wins. It works on a snapshot of the host's files (confFS), so
// the same walk tells what wins today and what would win once pgtune's
// planned edits are made.

// confFile is one file as read from the host.
type confFile struct {
	Exists     bool
	Content    []byte
	Mode       string // octal, as stat %a prints it
	Owner      string
	Group      string
	Unreadable bool
	// Real is the file links lead to, when they do (see linkPolicy);
	// Dangling says they lead nowhere.
	Real     string
	Dangling bool
}

// target is where a write of p goes: the real file when p is reached
// through links (the links stay).
func (fs *confFS) target(p string) string {
	if f := fs.Files[p]; f != nil && f.Real != "" {
		return f.Real
	}
	return p
}

// confFS is a snapshot of the configuration files and include directories
// of one cluster. A path absent from the maps has not been read yet.
type confFS struct {
	Files map[string]*confFile
	// Dirs maps a directory to the names of the regular *.conf files in
	// it; nil value: the directory does not exist.
	Dirs map[string][]string
}

func newConfFS() *confFS {
	return &confFS{Files: map[string]*confFile{}, Dirs: map[string][]string{}}
}

func (fs *confFS) clone() *confFS {
	out := newConfFS()
	for p, f := range fs.Files {
		c := *f
		c.Content = append([]byte(nil), f.Content...)
		out.Files[p] = &c
	}
	for d, names := range fs.Dirs {
		if names == nil {
			out.Dirs[d] = nil
			continue
		}
		out.Dirs[d] = append([]string{}, names...)
	}
	return out
}

// put sets a file's content as planned, creating it (and listing it in its
// directory, when that directory is known) if needed.
func (fs *confFS) put(p string, content []byte) {
	f, ok := fs.Files[p]
	if !ok || !f.Exists {
		f = &confFile{Exists: true}
		fs.Files[p] = f
		dir, name := path.Split(p)
		dir = path.Clean(dir)
		if strings.HasSuffix(name, ".conf") && !strings.HasPrefix(name, ".") {
			names := fs.Dirs[dir]
			if !contains(names, name) {
				names = append(names, name)
				sort.Strings(names)
			}
			fs.Dirs[dir] = names
		}
	}
	f.Content = content
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// entry is one `name = value` line.
type entry struct {
	File  string
	Line  int
	Name  string // lower case
	Value string // unquoted
	Text  string // the line as written
}

func (e entry) where() string { return fmt.Sprintf("%s:%d", e.File, e.Line) }

// directive is an include line.
type directive struct {
	File   string
	Line   int
	Kind   string // include, include_if_exists, include_dir
	Target string // resolved absolute path
}

// walk is the result of reading a configuration.
type walk struct {
	Entries    []entry
	Directives []directive
	// Missing lists files ("f:" prefix) and directories ("d:") the walk
	// needs but the snapshot does not hold yet.
	Missing []string
	// Read lists every file the walk read, in order.
	Read []string
}

// maxDepth is PostgreSQL's CONF_FILE_MAX_DEPTH.
const maxDepth = 10

// walkConfig reads mainConf and then autoConf (empty: none) from fs.
func walkConfig(fs *confFS, mainConf, autoConf string) (*walk, error) {
	w := &walk{}
	seenMissing := map[string]bool{}
	need := func(s string) {
		if !seenMissing[s] {
			seenMissing[s] = true
			w.Missing = append(w.Missing, s)
		}
	}
	var visit func(p string, depth int, optional bool, from string) error
	visit = func(p string, depth int, optional bool, from string) error {
		if depth > maxDepth {
			return fmt.Errorf("%s: includes nested deeper than %d levels", from, maxDepth)
		}
		f, ok := fs.Files[p]
		if !ok {
			need("f:" + p)
			return nil
		}
		if f.Unreadable {
			return fmt.Errorf("cannot read %s as the cluster owner, nor can the server: make it readable by the owner or remove it", p)
		}
		if !f.Exists {
			if optional {
				return nil
			}
			return fmt.Errorf("%s: configuration file %s does not exist", from, p)
		}
		w.Read = append(w.Read, p)
		lines, err := parseConf(p, f.Content)
		if err != nil {
			return err
		}
		dir := path.Dir(p)
		for _, e := range lines {
			switch e.Name {
			case "include", "include_if_exists", "include_dir":
				target := e.Value
				if !path.IsAbs(target) {
					target = path.Join(dir, target)
				}
				target = path.Clean(target)
				w.Directives = append(w.Directives, directive{File: p, Line: e.Line, Kind: e.Name, Target: target})
				if e.Name != "include_dir" {
					if err := visit(target, depth+1, e.Name == "include_if_exists", e.where()); err != nil {
						return err
					}
					continue
				}
				names, ok := fs.Dirs[target]
				if !ok {
					need("d:" + target)
					continue
				}
				if names == nil {
					return fmt.Errorf("%s: include_dir %s does not exist", e.where(), target)
				}
				sorted := append([]string{}, names...)
				sort.Strings(sorted) // strcmp order, as the server sorts
				for _, n := range sorted {
					if err := visit(path.Join(target, n), depth+1, false, e.where()); err != nil {
						return err
					}
				}
			default:
				w.Entries = append(w.Entries, e)
			}
		}
		return nil
	}
	if err := visit(mainConf, 0, false, "config_file"); err != nil {
		return nil, err
	}
	if autoConf != "" {
		if err := visit(autoConf, 0, true, "data directory"); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// reads reports whether the walk read file p.
func (w *walk) reads(p string) bool { return contains(w.Read, p) }

// last returns the winning assignment of name, if any.
func (w *walk) last(name string) (entry, bool) {
	for i := len(w.Entries) - 1; i >= 0; i-- {
		if w.Entries[i].Name == name {
			return w.Entries[i], true
		}
	}
	return entry{}, false
}

// parseConf parses postgresql.conf syntax: one `name [=] value` per line,
// value a bare word or a single-quoted string (” or \' for a quote),
// # comments. Directive names come back like settings. Errors say file,
// line and what was wrong in pgtune's words, never the file's text: a
// file may hold secrets, or be a link to something that does.
func parseConf(file string, data []byte) ([]entry, error) {
	var out []entry
	for i, raw := range strings.Split(string(data), "\n") {
		lineNo := i + 1
		line := strings.TrimRight(raw, "\r")
		s := strings.TrimLeft(line, " \t\f\v")
		if s == "" || s[0] == '#' {
			continue
		}
		n := 0
		for n < len(s) && isNameChar(s[n], n == 0) {
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("%s:%d: syntax error: expected a setting name", file, lineNo)
		}
		name := strings.ToLower(s[:n])
		rest := strings.TrimLeft(s[n:], " \t")
		if strings.HasPrefix(rest, "=") {
			rest = strings.TrimLeft(rest[1:], " \t")
		}
		value, tail, err := parseValue(rest)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", file, lineNo, err)
		}
		tail = strings.TrimLeft(tail, " \t")
		if tail != "" && tail[0] != '#' {
			return nil, fmt.Errorf("%s:%d: syntax error: unexpected text after the value of %s", file, lineNo, name)
		}
		out = append(out, entry{File: file, Line: lineNo, Name: name, Value: value, Text: line})
	}
	return out, nil
}

func isNameChar(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case c >= '0' && c <= '9', c == '.', c == '-':
		return !first
	}
	return false
}

func parseValue(s string) (value, rest string, err error) {
	if s == "" {
		return "", "", fmt.Errorf("missing value")
	}
	if s[0] != '\'' {
		n := 0
		for n < len(s) && s[n] != ' ' && s[n] != '\t' && s[n] != '#' {
			n++
		}
		return s[:n], s[n:], nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' && i+1 < len(s) && s[i+1] == '\'':
			b.WriteByte('\'')
			i++
		case c == '\'':
			return b.String(), s[i+1:], nil
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("unterminated quoted string")
}

// quoteConf renders s as a single-quoted configuration string.
func quoteConf(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// commentOut returns data with line lineNo turned into a comment that says
// why, keeping the original text so a human can see what was there.
func commentOut(data []byte, lineNo int, why string) ([]byte, error) {
	lines := strings.Split(string(data), "\n")
	if lineNo < 1 || lineNo > len(lines) {
		return nil, fmt.Errorf("line %d out of range", lineNo)
	}
	lines[lineNo-1] = "#" + lines[lineNo-1] + "\t# " + why
	return []byte(strings.Join(lines, "\n")), nil
}

// appendLine adds line at the end of data, after a newline if the file
// does not end with one.
func appendLine(data []byte, line string) []byte {
	out := append([]byte(nil), data...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, line+"\n"...)
}

// Sizes. PostgreSQL memory units are powers of 1024; a bare number is in
// the setting's own unit.

var units = []struct {
	suffix string
	bytes  int64
}{{"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"kB", 1 << 10}, {"B", 1}}

// parseSize reads a memory setting; bare numbers are in unit bytes.
func parseSize(s string, unit int64) (int64, error) {
	s = strings.TrimSpace(s)
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
			if err != nil || !sizeFits(n, u.bytes) {
				return 0, fmt.Errorf("invalid size %q", s)
			}
			return n * u.bytes, nil
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || !sizeFits(n, unit) {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return n * unit, nil
}

// sizeFits reports whether n units stay within ±facts.MaxBytes, so that
// a value from a host's file cannot wrap around when converted.
func sizeFits(n, unit int64) bool {
	return unit > 0 && n >= -facts.MaxBytes/unit && n <= facts.MaxBytes/unit
}

// formatSize renders bytes the way SHOW does: the largest unit that
// divides exactly.
func formatSize(b int64) string {
	if b == 0 {
		return "0"
	}
	for _, u := range units[:4] {
		if b%u.bytes == 0 {
			return strconv.FormatInt(b/u.bytes, 10) + u.suffix
		}
	}
	return strconv.FormatInt(b, 10) + "B"
}

// sameSetting compares two values of a managed setting as the server
// would read them.
func sameSetting(name, a, b string) bool {
	switch name {
	case "shared_buffers":
		x, err1 := parseSize(a, 8192)
		y, err2 := parseSize(b, 8192)
		return err1 == nil && err2 == nil && x == y
	case "huge_page_size":
		x, err1 := parseSize(a, 1024)
		y, err2 := parseSize(b, 1024)
		return err1 == nil && err2 == nil && x == y
	case "huge_pages":
		return hugePagesValue(a) == hugePagesValue(b)
	}
	return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}

// hugePagesValue normalises the boolean spellings huge_pages accepts.
func hugePagesValue(s string) string {
	switch v := strings.ToLower(strings.TrimSpace(s)); v {
	case "on", "true", "yes", "1", "t", "y":
		return "on"
	case "off", "false", "no", "0", "f", "n":
		return "off"
	default:
		return v
	}
}
