// Package mask hides secrets by their structure, wherever they sit in text
// pgtune shows, logs or journals: libpq connection strings (key=value
// and postgresql:// URI forms), settings whose names say they hold a
// secret (primary_conninfo's password, *password*, ssl_passphrase_command),
// credentials inside commands (archive_command, restore_command, the
// inventory's pg_restart: PGPASSWORD=..., --password=..., user:pass@,
// AWS_SECRET_ACCESS_KEY=..., curl -u user:pass).
//
// It works on text, not on parsed data, because the same secret reaches
// pgtune's output through many shapes: a line of postgresql.auto.conf, a
// unified diff of it, an error quoting a command line. Each rule errs on
// the side of hiding more: a value whose end is unclear is hidden to the
// end of its line. Masking is idempotent and never spans lines, so a diff
// masked line by line is the diff of the masked files.
package mask

import (
	"regexp"
	"strings"
)

// Masked is what a hidden value is shown as.
const Masked = "(sensitive)"

// SensitiveName reports whether a setting, variable or option name says
// it holds a secret: it contains pass (password, passwd, passphrase,
// PGPASS), secret, token, credential or pwd (but not the shell's PWD), or
// ends in _key / -key / apikey (AWS_SECRET_ACCESS_KEY, --private-key).
func SensitiveName(name string) bool {
	n := strings.ToLower(strings.TrimLeft(name, "-"))
	for _, w := range []string{"pass", "secret", "token", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	if strings.Contains(n, "pwd") && n != "pwd" && n != "oldpwd" {
		return true
	}
	return strings.HasSuffix(n, "_key") || strings.HasSuffix(n, "-key") || strings.HasSuffix(n, "apikey")
}

var (
	// assignName finds NAME= (and NAME = ) whose name may be sensitive:
	// env assignments, conninfo keywords, --option=value.
	assignName = regexp.MustCompile(`[A-Za-z0-9_.-]+\s*=\s*`)
	// spacedOption finds --option VALUE for sensitive long options.
	spacedOption = regexp.MustCompile(`--[A-Za-z0-9_-]+\s+`)
	// uriUserinfo finds scheme://user:password@. The password should be
	// percent-encoded but may not be: it runs to the last @ of the word.
	uriUserinfo = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://[^\s/?#@:'"]*):([^\s?#]*)@`)
	// curlUser finds -u user:password and --user user:password.
	curlUser = regexp.MustCompile(`(^|\s)(-u\s*|--user[=\s]\s*)([^\s:'"]+):(\S+)`)
	// value is a shell- or libpq-style value: quoted parts (backslash
	// escapes inside; an unterminated quote runs to the end of the line)
	// and unquoted characters, up to unquoted white space.
	value = regexp.MustCompile(`^(?:'(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?|\\.?|[^\s'"\\])+`)
	// uriQueryValue is a value inside a URI query: it ends at & or #.
	uriQueryValue = regexp.MustCompile(`^[^\s&#]+`)
)

// Text masks every credential in free text (errors, notes, log values,
// command lines), line by line.
func Text(s string) string { return text(s, nil) }

// Secrets returns the credential values found in s, as written and, when
// quoted, unquoted: pgtune masks them wherever else they appear (a
// pg_restart whose PGPASSWORD a failing command echoes).
func Secrets(s string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(v string) {
		for _, x := range []string{v, unquoteShell(v)} {
			if x != "" && x != Masked && !seen[x] {
				seen[x] = true
				out = append(out, x)
			}
		}
	}
	text(s, add)
	return out
}

func text(s string, found func(string)) string {
	if !strings.ContainsAny(s, "=:-") {
		return s // nothing any rule matches: the common case costs a scan
	}
	if !strings.Contains(s, "\n") {
		return line(s, found)
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = line(l, found)
	}
	return strings.Join(lines, "\n")
}

func line(s string, found func(string)) string {
	s = uriUserinfo.ReplaceAllStringFunc(s, func(m string) string {
		sub := uriUserinfo.FindStringSubmatch(m)
		if sub[2] == Masked {
			return m
		}
		report(found, sub[2])
		return sub[1] + ":" + Masked + "@"
	})
	s = curlUser.ReplaceAllStringFunc(s, func(m string) string {
		sub := curlUser.FindStringSubmatch(m)
		if sub[4] == Masked {
			return m
		}
		report(found, sub[4])
		return sub[1] + sub[2] + sub[3] + ":" + Masked
	})
	s = maskAfter(s, assignName, func(name string) bool {
		return SensitiveName(strings.TrimRight(name, " \t="))
	}, found)
	s = maskAfter(s, spacedOption, func(opt string) bool {
		return SensitiveName(strings.TrimSpace(opt))
	}, found)
	return s
}

func report(found func(string), v string) {
	if found != nil {
		found(v)
	}
}

// maskAfter replaces the value following each match of re whose text
// sensitive accepts.
func maskAfter(s string, re *regexp.Regexp, sensitive func(string) bool, found func(string)) string {
	locs := re.FindAllStringIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, loc := range locs {
		if loc[0] < last || !sensitive(s[loc[0]:loc[1]]) {
			continue
		}
		rest := s[loc[1]:]
		if strings.HasPrefix(rest, "-") && re == spacedOption {
			continue // --password -D: the option takes no value here
		}
		vre := value
		if loc[0] > 0 && (s[loc[0]-1] == '?' || s[loc[0]-1] == '&') {
			vre = uriQueryValue
		}
		v := vre.FindString(rest)
		if v == "" || strings.HasPrefix(v, Masked) || strings.HasPrefix(v, "'"+Masked) {
			continue
		}
		report(found, v)
		b.WriteString(s[last:loc[1]])
		b.WriteString(Masked)
		last = loc[1] + len(v)
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// unquoteShell strips one level of matching quotes.
func unquoteShell(v string) string {
	if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}
