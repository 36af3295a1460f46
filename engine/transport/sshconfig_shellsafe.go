package transport

import (
	"fmt"
	"strings"
	"unicode"
)

// shellMeta are the characters a POSIX shell treats specially in an
// unquoted word. A host or user name holding one of them would run as
// part of a Match exec or ProxyCommand command line.
const shellMeta = "'\"`$\\;&|<>(){}[]*?~#"

// nameTokens are the %-tokens whose value is a name (host, alias, user,
// port, host key alias, jump hosts) that ends up unquoted in a command
// line. %u %d %l %L %i come from this machine and are not checked.
const nameTokens = "hnrpkj"

// shellUnsafe reports why s cannot go into a shell command unquoted: a
// shell metacharacter, white space or a control character, or a leading
// '-' (it would read as an option). It returns "" when s is safe.
// OpenSSH 9.6 (CVE-2023-51385) refuses such names for the same reason.
func shellUnsafe(s string) string {
	if strings.HasPrefix(s, "-") {
		return "starts with '-'"
	}
	for _, r := range s {
		switch {
		case strings.ContainsRune(shellMeta, r):
			return fmt.Sprintf("contains the shell metacharacter %q", r)
		case unicode.IsSpace(r):
			return fmt.Sprintf("contains white space %q", r)
		case unicode.IsControl(r) || r == unicode.ReplacementChar:
			return fmt.Sprintf("contains the control character %q", r)
		}
	}
	return ""
}

// safeNameTokens wraps a token function for a command line: a name token
// whose value is unsafe expands to nothing and is recorded in *bad, so the
// caller refuses the command instead of handing it to the shell.
func safeNameTokens(value func(byte) (string, bool), bad *error) func(byte) (string, bool) {
	return func(t byte) (string, bool) {
		v, ok := value(t)
		if !ok || !strings.ContainsRune(nameTokens, rune(t)) {
			return v, ok
		}
		if why := shellUnsafe(v); why != "" {
			if *bad == nil {
				*bad = fmt.Errorf("%%%c expands to %q, which %s; pgtune, like ssh(1), does not put such names into a command", t, v, why)
			}
			return "", true
		}
		return v, ok
	}
}
