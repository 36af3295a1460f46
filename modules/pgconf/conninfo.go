package pgconf

import (
	"errors"
	"fmt"
	"strings"
)

// A switchover repoints standbys: their primary_conninfo keeps every
// keyword (user, password, passfile, sslmode, ...) but host and port. The
// string holds secrets: it is parsed and rebuilt here, never shown.

// conninfoPair is one keyword = value of a libpq connection string.
type conninfoPair struct{ key, value string }

// parseConninfo reads libpq's keyword = value form, in order. The URI
// form and anything malformed are refused: the reason never quotes the
// string (it may hold a password). So is a control character in a
// keyword or value (checkConninfoValue).
func parseConninfo(s string) ([]conninfoPair, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "postgresql://") || strings.HasPrefix(s, "postgres://") {
		return nil, errors.New("primary_conninfo is a URI; pgtune rewrites only the keyword = value form")
	}
	var out []conninfoPair
	i := 0
	space := func() {
		for i < len(s) && strings.IndexByte(" \t\n\r\f\v", s[i]) >= 0 {
			i++
		}
	}
	for {
		space()
		if i >= len(s) {
			return out, nil
		}
		j := i
		for j < len(s) && s[j] != '=' && strings.IndexByte(" \t\n\r\f\v", s[j]) < 0 {
			j++
		}
		key := s[i:j]
		i = j
		space()
		if key == "" || i >= len(s) || s[i] != '=' {
			return nil, errors.New("primary_conninfo is not a keyword = value list")
		}
		i++
		space()
		var v strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			for {
				if i >= len(s) {
					return nil, errors.New("primary_conninfo has an unterminated quoted value")
				}
				if s[i] == '\'' {
					i++
					break
				}
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				v.WriteByte(s[i])
				i++
			}
		} else {
			for i < len(s) && strings.IndexByte(" \t\n\r\f\v", s[i]) < 0 {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				v.WriteByte(s[i])
				i++
			}
		}
		if err := checkConninfoValue(key, v.String()); err != nil {
			return nil, err
		}
		out = append(out, conninfoPair{key, v.String()})
	}
}

// checkConninfoValue refuses a control character in a keyword or value.
// A member's connection string is written into another member's
// configuration file (repointLine), where a line break would end the
// line inside the quoted value: that server would not start. The reason
// names the keyword, never the value (it may be a password).
func checkConninfoValue(key, value string) error {
	if hasControl(key) {
		return errors.New("primary_conninfo has a keyword holding a control character")
	}
	if hasControl(value) {
		return fmt.Errorf("primary_conninfo: the value of %s holds a control character (a line break, tab or other): pgtune does not write it into a configuration file", key)
	}
	return nil
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// conninfoGet is the last value of key ("" when absent): libpq keeps the
// last.
func conninfoGet(pairs []conninfoPair, key string) string {
	v := ""
	for _, p := range pairs {
		if p.key == key {
			v = p.value
		}
	}
	return v
}

// repoint returns the connection string with host and port replaced (and
// hostaddr, and the keys in drop, removed), every other keyword kept in
// its place.
func repoint(pairs []conninfoPair, host string, port int, drop ...string) string {
	var b strings.Builder
	put := func(k, v string) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + quoteConninfo(v))
	}
	skip := map[string]bool{"hostaddr": true, "host": true, "port": true}
	for _, d := range drop {
		skip[d] = true
	}
	put("host", host)
	put("port", fmt.Sprint(port))
	for _, p := range pairs {
		if !skip[p.key] {
			put(p.key, p.value)
		}
	}
	return b.String()
}

// repointLine is the primary_conninfo line of repoint(pairs, host, port,
// drop...). The pairs were checked when parsed; host comes from the new
// primary (its pgtune_replication_host, socket directory or inventory
// address) and is checked here.
func repointLine(pairs []conninfoPair, host string, port int, drop ...string) (string, error) {
	if err := checkConninfoValue("host", host); err != nil {
		return "", err
	}
	return conninfoLine(repoint(pairs, host, port, drop...)), nil
}

// quoteConninfo quotes a connection string value when it needs it.
func quoteConninfo(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\f\v'\\") {
		return v
	}
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(v) + "'"
}

// confString renders a value as a configuration file string literal.
func confString(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(v) + "'"
}

// conninfoLine is the configuration line that sets primary_conninfo.
func conninfoLine(conninfo string) string {
	return "primary_conninfo = " + confString(conninfo)
}

// replaceConfLine replaces line n (1-based) of a configuration file, which
// must set name, with line. Anything else is refused: the file moved
// since the server read it.
func replaceConfLine(content []byte, n int, name, line string) ([]byte, error) {
	lines := strings.SplitAfter(string(content), "\n")
	if n < 1 || n > len(lines) {
		return nil, fmt.Errorf("the file has no line %d any more", n)
	}
	old := strings.TrimSpace(lines[n-1])
	k, _, ok := strings.Cut(old, "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(k), name) {
		return nil, fmt.Errorf("line %d does not set %s any more", n, name)
	}
	nl := ""
	if strings.HasSuffix(lines[n-1], "\n") {
		nl = "\n"
	}
	lines[n-1] = line + nl
	return []byte(strings.Join(lines, "")), nil
}

// appendConfLine adds line at the end of a configuration file.
func appendConfLine(content []byte, line string) []byte {
	out := append([]byte(nil), content...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, line+"\n"...)
}
