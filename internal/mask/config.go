package mask

import (
	"strings"
)

// Config masks a configuration file's content (postgresql.conf,
// postgresql.auto.conf, a drop-in; any "name = value" file) line by line:
// the whole value of a setting whose name says it holds a secret
// (*password*, ssl_passphrase_command, ...), and the credentials inside
// every other value (primary_conninfo's password, archive_command's
// PGPASSWORD). Commented-out settings are masked too: a disabled line
// still holds a real password. Lines with nothing to hide are kept byte
// for byte.
func Config(content string) string {
	if !strings.Contains(content, "\n") {
		return ConfigLine(content)
	}
	return mapLines(content, ConfigLine)
}

// mapLines returns s with f applied to each of its lines, and s itself
// when f changes none: a fleet's report holds every host's configuration
// files, which mostly have nothing to mask and need not be copied.
func mapLines(s string, f func(string) string) string {
	lines := strings.Split(s, "\n")
	changed := false
	for i, l := range lines {
		if m := f(l); m != l {
			lines[i], changed = m, true
		}
	}
	if !changed {
		return s
	}
	return strings.Join(lines, "\n")
}

// ConfigLine masks one line of a configuration file.
func ConfigLine(l string) string {
	if head, key, val, ok := parseYAMLPair(l); ok {
		// A YAML mapping (patroni.yml, ...): "password: S3cret".
		if SensitiveName(key) && val != "" && val != Masked {
			return head + Masked
		}
		return Text(l)
	}
	s, ok := parseSetting(l)
	if !ok {
		return Text(l)
	}
	val := s.value
	switch {
	case SensitiveName(s.name):
		if val == "'"+Masked+"'" || val == Masked {
			break
		}
		val = "'" + Masked + "'"
	case strings.HasPrefix(val, "'"):
		inner := unquoteConf(val)
		if m := Text(inner); m != inner {
			val = quoteConf(m)
		}
	default:
		val = Text(val)
	}
	rest := Text(s.rest)
	if SensitiveName(s.name) && !strings.HasPrefix(s.value, "'") {
		// An unquoted secret's value is one word to PostgreSQL, but a
		// line such as ssl_passphrase_command = echo pw (a syntax error
		// the server names) holds the rest of it after a space: hidden
		// to the end of the line (a comment right after the value kept).
		if t := strings.TrimLeft(s.rest, " \t"); t != "" && t[0] != '#' {
			rest = ""
		}
	}
	if val == s.value && rest == s.rest {
		return l
	}
	return s.head + val + rest
}

// setting is a config line cut in three: everything up to the value
// (indent, an optional #, the name, the = ), the value as written, and
// what follows it (a comment).
type setting struct {
	head, name, value, rest string
}

// parseSetting cuts a line of the form [#] name [=] value [# comment], the
// way PostgreSQL's configuration lexer reads it (names may hold dots,
// values are one word or a quoted string in which a quote is doubled or
// backslash-escaped).
func parseSetting(l string) (setting, bool) {
	i := skipSpace(l, 0)
	if i < len(l) && l[i] == '#' {
		i = skipSpace(l, i+1)
	}
	start := i
	for i < len(l) && isNameByte(l[i], i == start) {
		i++
	}
	if i == start {
		return setting{}, false
	}
	name := l[start:i]
	i = skipSpace(l, i)
	if i < len(l) && l[i] == '=' {
		i = skipSpace(l, i+1)
	}
	if i >= len(l) || l[i] == '#' {
		return setting{}, false
	}
	vstart := i
	if l[i] == '\'' {
		i = endOfQuoted(l, i)
	} else {
		for i < len(l) && l[i] != ' ' && l[i] != '\t' && l[i] != '#' {
			i++
		}
	}
	return setting{head: l[:vstart], name: name, value: l[vstart:i], rest: l[i:]}, true
}

func skipSpace(l string, i int) int {
	for i < len(l) && (l[i] == ' ' || l[i] == '\t' || l[i] == '\r') {
		i++
	}
	return i
}

func isNameByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case c >= '0' && c <= '9', c == '.', c == '-', c == '$':
		return !first
	}
	return false
}

// endOfQuoted returns the index after the '…' string starting at i; an
// unterminated string runs to the end of the line.
func endOfQuoted(l string, i int) int {
	for j := i + 1; j < len(l); j++ {
		switch l[j] {
		case '\\':
			j++
		case '\'':
			if j+1 < len(l) && l[j+1] == '\'' {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(l)
}

// unquoteConf returns the content of a '…' value (as parseSetting cut
// it), with doubled quotes made single; backslash escapes are kept as written
// (libpq and the shell read them the same way inside the value).
func unquoteConf(v string) string {
	// Most values hold no escape: their inside, without a copy.
	if inner := v[1:]; strings.IndexByte(inner, '\\') < 0 {
		j := strings.IndexByte(inner, '\'')
		if j < 0 {
			return inner
		}
		if j+1 >= len(inner) || inner[j+1] != '\'' {
			return inner[:j]
		}
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch {
		case v[i] == '\\' && i+1 < len(v):
			b.WriteByte(v[i])
			i++
			b.WriteByte(v[i])
		case v[i] == '\'' && i+1 < len(v) && v[i+1] == '\'':
			b.WriteByte('\'')
			i++
		case v[i] == '\'':
			return b.String() // the closing quote
		default:
			b.WriteByte(v[i])
		}
	}
	return b.String()
}

// quoteConf is unquoteConf's inverse.
func quoteConf(v string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(v); i++ {
		switch {
		case v[i] == '\\' && i+1 < len(v):
			b.WriteByte(v[i])
			i++
			b.WriteByte(v[i])
		case v[i] == '\'':
			b.WriteString("''")
		default:
			b.WriteByte(v[i])
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// Diff masks a unified diff of configuration files: its header lines as
// text, every other line as a configuration line behind its one-character
// prefix. Since masking never spans lines, this is the diff of the masked
// files.
func Diff(d string) string {
	inHunk := false
	return mapLines(d, func(l string) string {
		switch {
		case strings.HasPrefix(l, "@@"):
			inHunk = true
			return Text(l)
		case !inHunk || l == "":
			return Text(l)
		case l[0] == ' ' || l[0] == '+' || l[0] == '-':
			if m := ConfigLine(l[1:]); m != l[1:] {
				return l[:1] + m
			}
			return l
		default: // "\ No newline at end of file"
			return Text(l)
		}
	})
}

// parseYAMLPair cuts a YAML "key: value" line (indent, an optional # and
// list dashes, a plain key, a colon then a blank or the end of the line)
// into everything up to the value, the key and the value ("" for a key
// that opens a nested mapping or has no value). A postgresql.conf line is
// never one: a setting's name cannot end in a colon.
func parseYAMLPair(l string) (head, key, val string, ok bool) {
	i := skipSpace(l, 0)
	if i < len(l) && l[i] == '#' {
		i = skipSpace(l, i+1)
	}
	for i+1 < len(l) && l[i] == '-' && (l[i+1] == ' ' || l[i+1] == '\t') {
		i = skipSpace(l, i+1)
	}
	start := i
	for i < len(l) && isNameByte(l[i], i == start) {
		i++
	}
	if i == start || i >= len(l) || l[i] != ':' || (i+1 < len(l) && l[i+1] != ' ' && l[i+1] != '\t' && l[i+1] != '\r') {
		return "", "", "", false
	}
	key = l[start:i]
	v := skipSpace(l, i+1)
	return l[:v], key, strings.TrimRight(l[v:], " \t\r"), true
}
