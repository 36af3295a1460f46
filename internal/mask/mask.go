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
// PGPASS), secret, token, credential, proxyauth (socat, ncat's
// --proxy-auth) or pwd (but not the shell's PWD), or
// ends in _key / -key / apikey (AWS_SECRET_ACCESS_KEY, --private-key).
func SensitiveName(name string) bool {
	n := strings.ToLower(strings.TrimLeft(name, "-"))
	if notSecret[n] {
		return false
	}
	if n == "sig" {
		return true // an Azure SAS token's signature (?sig=)
	}
	for _, w := range []string{"pass", "secret", "token", "credential", "bearer", "signature", "proxyauth", "proxy-auth"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	if strings.Contains(n, "pwd") && n != "pwd" && n != "oldpwd" {
		return true
	}
	return strings.HasSuffix(n, "_key") || strings.HasSuffix(n, "-key") || strings.HasSuffix(n, "apikey")
}

// notSecret are PostgreSQL settings whose names match SensitiveName's
// words but whose values are no secret and are worth showing: the hash
// method of new passwords (an enum) and whether ssl_passphrase_command
// runs again on reload (a boolean). Paths such as ssl_key_file and
// krb_server_keyfile match no word in the first place.
var notSecret = map[string]bool{
	"password_encryption":                    true,
	"ssl_passphrase_command_supports_reload": true,
}

var (
	// spacedOption finds --option VALUE for sensitive long options.
	spacedOption = regexp.MustCompile(`--[A-Za-z0-9_-]+\s+`)
	// uriUserinfo finds scheme://user:password@. The password should be
	// percent-encoded but may not be: it runs to the last @ of the word.
	uriUserinfo = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://[^\s/?#@:'"]*):(\S*)@`)
	// curlUser finds curl's -u, -U (proxy), --user and --proxy-user
	// options, before their user:password (lftp's -u user,password and
	// smbclient's -U user%password too), also last in a cluster of short
	// options (curl -fsSu).
	curlUser = regexp.MustCompile(`(^|\s)(-[A-Za-z]*[uU]\s*|--(?:proxy-)?user[=\s]\s*)`)
	// opensslPass finds OpenSSL's password arguments given in the clear
	// (-pass pass:PW, -passin, -passout; env:, file: and fd: name no
	// secret), before the password.
	opensslPass = regexp.MustCompile(`(?:^|\s)-pass(?:in|out|word)?\s+pass:`)
	// opensslKey finds openssl enc's -k PASSWORD (only where openssl is
	// on the line: curl's -k takes no value).
	opensslKey = regexp.MustCompile(`(?:^|\s)-k\s+`)
	// authHeader finds an HTTP Authorization (or Proxy-Authorization)
	// header, before its value: curl -H "Authorization: Bearer TOKEN".
	authHeader = regexp.MustCompile(`(?i)(?:^|[^\w-])((?:proxy-)?authorization)\s*:[ \t]*`)
	// headerOption finds any header given to curl's -H or wget's
	// --header, before its value: -H "X-Api-Key: KEY".
	headerOption = regexp.MustCompile(`(?:^|\s)(?:-H|--header)[=\s]*(?:''|\\?['"])?([A-Za-z][\w-]*)\s*:[ \t]*`)
	// value is a shell- or libpq-style value: quoted parts (backslash
	// escapes inside; an unterminated quote runs to the end of the line)
	// and unquoted characters, up to unquoted white space.
	value = regexp.MustCompile(`^(?:'(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?|\\.?|[^\s'"\\])+`)
	// uriQueryValue is a value inside a URI query: it ends at & or #.
	// A quote ends it too: it is the shell's, around the URI.
	uriQueryValue = regexp.MustCompile(`^[^\s&#'"]+`)
	// sshpassOption finds sshpass's -p, after its other options (each
	// with at most one argument).
	sshpassOption = regexp.MustCompile(`(?:^|[^\w-])sshpass(?:\s+-[^p\s-]\S*(?:\s+[^-\s]\S*)?)*\s+-p\s*`)
	// mysqlProgram and mysqlPassword find mysql's -pPASSWORD (a bare -p
	// asks for it).
	mysqlProgram  = regexp.MustCompile(`(?:^|[^\w-])(?:mysql|mariadb)[\w-]*(?:\s|$)`)
	mysqlPassword = regexp.MustCompile(`\s-p`)
	// keyColon finds a YAML or JSON key before its colon: start of line,
	// white space, { or , before it; "key": or key: followed by a space.
	keyColon = regexp.MustCompile(`(?:^|[\s{,])(?:"([A-Za-z_][A-Za-z0-9_.-]*)"\s*:|'([A-Za-z_][A-Za-z0-9_.-]*)'\s*:|([A-Za-z_][A-Za-z0-9_.-]*):\s)\s*`)
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
	return mapLines(s, func(l string) string { return line(l, found) })
}

func line(s string, found func(string)) string {
	if strings.Contains(s, "://") {
		s = maskURIs(s, found)
	}
	if containsFold(s, "authorization") {
		s = maskHeaders(s, authHeader, found)
	}
	if strings.Contains(s, "-H") || strings.Contains(s, "--header") {
		s = maskHeaders(s, headerOption, found)
	}
	if hasUserOption(s) {
		s = maskCurlUser(s, found)
	}
	if strings.Contains(s, "openssl") {
		s = maskAfter(s, opensslKey, func(string) bool { return true }, found)
	}
	if strings.Contains(s, "pass:") {
		s = maskAfter(s, opensslPass, func(string) bool { return true }, found)
	}
	if strings.Contains(s, "-p") && (strings.Contains(s, "mysql") || strings.Contains(s, "mariadb")) {
		s = maskMySQL(s, found)
	}
	if !hasSensitiveWord(s) {
		return s // most lines: no name here can be a secret's
	}
	s = maskAssignments(s, found)
	if strings.Contains(s, "sshpass") {
		s = maskAfter(s, sshpassOption, func(string) bool { return true }, found)
	}
	if strings.Contains(s, ":") {
		s = maskKeys(s, found)
	}
	if strings.Contains(s, "--") {
		s = maskAfter(s, spacedOption, func(opt string) bool {
			return SensitiveName(strings.TrimSpace(opt))
		}, found)
	}
	return s
}

// hasUserOption reports, in one pass, whether s may hold an option
// curlUser finds: a word starting with - whose letters include u or U
// (-u, -fsSu), --user or --proxy-user. It spares the regular expression
// the many configuration lines that only have a dash and a u somewhere.
func hasUserOption(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '-' || (i > 0 && s[i-1] != ' ' && s[i-1] != '\t' && s[i-1] != '\n' && s[i-1] != '\r' && s[i-1] != '\v' && s[i-1] != '\f') {
			continue
		}
		rest := s[i+1:]
		if strings.HasPrefix(rest, "-user") || strings.HasPrefix(rest, "-proxy-user") {
			return true
		}
		for j := 0; j < len(rest) && (rest[j]|0x20 >= 'a' && rest[j]|0x20 <= 'z'); j++ {
			if rest[j]|0x20 == 'u' {
				return true
			}
		}
	}
	return false
}

// hasSensitiveWord reports, in one pass and without allocating, whether s
// holds (in any case) a word SensitiveName looks for.
func hasSensitiveWord(s string) bool {
	for i := 0; i < len(s); i++ {
		var words []string
		switch s[i] | 0x20 {
		case 'p':
			words = []string{"pass", "pwd", "proxyauth", "proxy-auth"}
		case 's':
			words = []string{"secret", "sig"}
		case 'b':
			words = []string{"bearer"}
		case 't':
			words = []string{"token"}
		case 'c':
			words = []string{"credential"}
		case 'k':
			words = []string{"key"}
		default:
			continue
		}
		for _, w := range words {
			if hasPrefixFold(s[i:], w) {
				return true
			}
		}
	}
	return false
}

// containsFold is strings.Contains, ASCII case-insensitive; w is lower
// case.
func containsFold(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if hasPrefixFold(s[i:], w) {
			return true
		}
	}
	return false
}

// maskHeaders masks the value of every HTTP header re finds (its name in
// group 1) that is an Authorization header or whose name is sensitive: a
// value runs to the quote around the header (or the end of the line). An
// Authorization value's first word, when more follows, is the scheme
// (Bearer, Basic) and kept.
func maskHeaders(s string, re *regexp.Regexp, found func(string)) string {
	locs := re.FindAllStringSubmatchIndex(s, -1)
	var b strings.Builder
	last := 0
	for _, loc := range locs {
		if loc[0] < last {
			continue
		}
		name := strings.ToLower(s[loc[2]:loc[3]])
		auth := strings.HasSuffix(name, "authorization")
		if !auth && !SensitiveName(name) {
			continue
		}
		rest := s[loc[1]:]
		end := len(rest)
		if i := strings.IndexAny(rest, `'"\`); i >= 0 {
			end = i
		}
		v := strings.TrimRight(rest[:end], " \t\r")
		start := 0
		if i := strings.IndexAny(v, " \t"); auth && i > 0 {
			start = i + 1
			for start < len(v) && (v[start] == ' ' || v[start] == '\t') {
				start++
			}
		}
		cred := v[start:]
		if cred == "" || cred == Masked {
			continue
		}
		report(found, cred)
		b.WriteString(s[last : loc[1]+start])
		b.WriteString(Masked)
		last = loc[1] + len(v)
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// hasPrefixFold is strings.HasPrefix, ASCII case-insensitive; prefix is
// lower case.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for j := 0; j < len(prefix); j++ {
		if s[j]|0x20 != prefix[j] {
			return false
		}
	}
	return true
}

func maskURIs(s string, found func(string)) string {
	return uriUserinfo.ReplaceAllStringFunc(s, func(m string) string {
		sub := uriUserinfo.FindStringSubmatch(m)
		if sub[2] == Masked {
			return m
		}
		report(found, sub[2])
		return sub[1] + ":" + Masked + "@"
	})
}

// curlQuotes are the quotes user:password may sit in, longest first: a
// quote doubled inside a configuration string, a backslash-escaped one,
// a shell quote.
var curlQuotes = []string{"''", `\'`, `\"`, "'", `"`}

// maskCurlUser masks the password of every -u/--user user:password. A
// quoted one is masked up to its closing quote (to the end of the line
// when there is none); an unquoted one is a shell word.
func maskCurlUser(s string, found func(string)) string {
	locs := curlUser.FindAllStringIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, loc := range locs {
		if loc[0] < last {
			continue
		}
		seps := userSeparators(s[:loc[0]])
		if seps == "" {
			continue
		}
		rest := s[loc[1]:]
		q := ""
		for _, c := range curlQuotes {
			if strings.HasPrefix(rest, c) {
				q = c
				break
			}
		}
		body := rest[len(q):]
		var user, pw, closing string
		if q == "" {
			u := strings.IndexAny(body, " \t'\""+seps)
			if u <= 0 || !strings.ContainsRune(seps, rune(body[u])) {
				continue
			}
			user, pw = body[:u], value.FindString(body[u+1:])
		} else {
			end := closingQuote(body, q)
			u := strings.IndexAny(body[:end], seps)
			if u < 0 {
				continue // no password: curl asks for it
			}
			user, pw = body[:u], body[u+1:end]
			// A shell word goes on past its closing quote ('pa''ss' is
			// pass, 'abc'"def" abcdef): the password is masked to the
			// word's end, and the quote closed.
			if word := len(value.FindString(rest)); (q == "'" || q == `"`) && word > len(q)+end+len(q) {
				pw, closing = rest[len(q)+u+1:word], q
			}
		}
		if pw == "" || pw == Masked {
			continue
		}
		report(found, pw)
		if v := shellUnquote(pw, q); v != pw && v != "" {
			report(found, v)
		}
		b.WriteString(s[last:loc[1]])
		b.WriteString(q + user + body[len(user):len(user)+1] + Masked + closing)
		last = loc[1] + len(q) + len(user) + 1 + len(pw)
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// shellUnquote is the value of pw, the end of a shell word whose
// first segment was opened with q ("" when unquoted; else pw runs to
// that segment's closing quote or past it): its quotes and backslash
// escapes taken out, as the shell does, so that Secrets reports what the
// command was given. Quotes of another layer (” in a configuration
// string, \') are left as they are.
func shellUnquote(pw, q string) string {
	if q != "" && q != "'" && q != `"` {
		return pw
	}
	var b strings.Builder
	in := q // the quote open at pw's start
	for i := 0; i < len(pw); i++ {
		c := pw[i]
		switch {
		case in == "'" && c == '\'':
			in = ""
		case in == "'":
			b.WriteByte(c)
		case in == `"` && c == '"':
			in = ""
		case c == '\\' && i+1 < len(pw) && (in == "" || strings.IndexByte(`"\$`+"`", pw[i+1]) >= 0):
			i++
			b.WriteByte(pw[i])
		case in == "" && (c == '\'' || c == '"'):
			in = string(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// userExempt are programs whose -u takes a user (and group), not a
// credential: docker exec -u postgres:postgres.
var userExempt = map[string]bool{
	"ps": true, "pgrep": true, "pkill": true, "top": true, "lsof": true, "crontab": true,
	"docker": true, "podman": true, "nerdctl": true, "runuser": true,
}

// userSeparators returns what separates the user from the password after
// a -u/-U option, given the text before it: lftp writes user,password,
// the Samba tools user%password, curl (and any unknown program)
// user:password; "" when the command's -u takes no credential. The
// command is the first word after the last shell separator or quote,
// past VAR=value assignments; a curl anywhere in it keeps it masked.
func userSeparators(before string) string {
	seg := before[strings.LastIndexAny(before, ";|&(`'\"")+1:]
	prog := ""
	for _, w := range strings.Fields(seg) {
		if !strings.Contains(w, "=") {
			prog = w[strings.LastIndexByte(w, '/')+1:]
			break
		}
	}
	switch {
	case prog == "lftp":
		return ":,"
	case prog == "smbclient" || prog == "rpcclient" || prog == "smbcacls" || prog == "smbget":
		return ":%"
	case userExempt[prog] && !strings.Contains(seg, "curl"):
		return ""
	}
	return ":"
}

// escapedQuote returns the doubled or backslash-escaped quote s starts
// with, when a value follows it (” or \' followed by white space is an
// empty value).
func escapedQuote(s string) string {
	for _, q := range curlQuotes[:3] {
		if strings.HasPrefix(s, q) && len(s) > len(q) && s[len(q)] != ' ' && s[len(q)] != '\t' {
			return q
		}
	}
	return ""
}

// closingQuote returns where q closes in s (the end of s when it does
// not); inside double quotes a backslash escapes the next byte.
func closingQuote(s, q string) int {
	for i := 0; i < len(s); i++ {
		if q == `"` && s[i] == '\\' {
			i++
			continue
		}
		if strings.HasPrefix(s[i:], q) {
			return i
		}
	}
	return len(s)
}

// maskAssignments masks the value of every NAME=value (NAME = value) whose
// name is sensitive: env assignments, conninfo keywords, --option=value.
func maskAssignments(s string, found func(string)) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			continue
		}
		end := i
		for end > last && (s[end-1] == ' ' || s[end-1] == '\t') {
			end--
		}
		start := end
		for start > last && isAssignNameByte(s[start-1]) {
			start--
		}
		if start == end || !SensitiveName(s[start:end]) {
			continue
		}
		v := i + 1
		for v < len(s) && (s[v] == ' ' || s[v] == '\t') {
			v++
		}
		vre := value
		if start > 0 && (s[start-1] == '?' || s[start-1] == '&') {
			vre = uriQueryValue
		}
		val := vre.FindString(s[v:])
		if q := escapedQuote(s[v:]); q != "" {
			// A value quoted inside a quoted string (a conninfo in a
			// configuration line: password=''S3 cr'') runs to the
			// matching quote, spaces and all.
			val = s[v:][:min(len(s)-v, len(q)+closingQuote(s[v+len(q):], q)+len(q))]
		}
		if val == "" || strings.HasPrefix(val, Masked) || strings.HasPrefix(val, "'"+Masked) {
			continue
		}
		if strings.HasSuffix(strings.ToLower(s[start:end]), "command") && val[0] != '\'' && val[0] != '"' {
			// An unquoted command (ssl_passphrase_command=echo pw) has
			// its arguments after a space: hidden to the end of the line.
			val = strings.TrimRight(s[v:], " \t\r")
		}
		report(found, val)
		b.WriteString(s[last:v])
		b.WriteString(Masked)
		last = v + len(val)
		i = last - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// maskMySQL masks the -pPASSWORD of a mysql or mariadb command line (its
// password sits right after -p, no space).
func maskMySQL(s string, found func(string)) string {
	loc := mysqlProgram.FindStringIndex(s)
	if loc == nil {
		return s
	}
	head := s[:loc[1]]
	if loc[1] > 0 {
		head = s[:loc[1]-1] // the space after the name may precede -p
	}
	return head + maskAfter(s[len(head):], mysqlPassword, func(string) bool { return true }, found)
}

// maskKeys masks the value of every sensitive YAML or JSON key (a
// password: in a flow map, a JSON object, a quoted scalar) Text meets. A
// value in a flow map or JSON ends at , or }; else it runs to a comment
// or the end of the line. A quoted one runs to its closing quote.
func maskKeys(s string, found func(string)) string {
	locs := keyColon.FindAllStringSubmatchIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, loc := range locs {
		if loc[0] < last {
			continue
		}
		var name string
		for g := 1; g <= 3; g++ {
			if loc[2*g] >= 0 {
				name = s[loc[2*g]:loc[2*g+1]]
			}
		}
		if !SensitiveName(name) {
			continue
		}
		rest := s[loc[1]:]
		var v string
		switch {
		case strings.HasPrefix(rest, `"`):
			v = rest[:min(len(rest), 1+closingQuote(rest[1:], `"`)+1)]
		case strings.HasPrefix(rest, "'"):
			end := 1
			for end < len(rest) && (rest[end] != '\'' || strings.HasPrefix(rest[end:], "''")) {
				if rest[end] == '\'' {
					end++ // a doubled quote inside
				}
				end++
			}
			v = rest[:min(len(rest), end+1)]
		default:
			flow := inFlow(s, loc[0])
			end := len(rest)
			if i := strings.Index(rest, " #"); i >= 0 {
				end = i
			}
			if i := strings.IndexAny(rest, ",}"); flow && i >= 0 && i < end {
				end = i
			}
			v = strings.TrimRight(rest[:end], " \t\r")
		}
		if v == "" || strings.HasPrefix(v, Masked) || v == `"`+Masked+`"` || v == "'"+Masked+"'" {
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

// inFlow says whether the key matched at i (its { , or space, if any)
// sits in a flow map or JSON object: after { or , past white space.
func inFlow(s string, i int) bool {
	for ; i >= 0 && i < len(s); i-- {
		switch s[i] {
		case '{', ',':
			return true
		case ' ', '\t':
			continue
		}
		return false
	}
	return false
}

func isAssignNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
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
		if strings.HasPrefix(rest, "-") {
			continue // --password -D: the option takes no value here
		}
		v := value.FindString(rest)
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
