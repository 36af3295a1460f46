// Package termsafe renders text that came from a host so that it cannot
// drive the terminal it is printed on. Paths, process names, file
// contents and error messages from a target are input, possibly hostile:
// an ESC sequence or a carriage return in a data directory's name could
// otherwise erase a report line and print a forged one over it, and a
// bidi override could make a line read differently from what it says.
//
// Every byte or rune that a terminal would act on instead of print is
// shown Go-quoted: control characters (C0, DEL, C1) as \x1b, \r, \t, ...,
// bidi controls and other invisible format characters as \u202e, and bytes
// that are not UTF-8 as \xff. Everything else, backslashes included, is
// left as it is: the output must still read as the config line or path it
// shows, and a literal "\x1b" typed by a host only looks like an escape,
// it cannot act as one.
package termsafe

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Line escapes s for use inside one line of output: newlines and tabs are
// escaped too.
func Line(s string) string { return escape(s, false) }

// Text escapes s keeping its newlines and tabs, for multi-line values a
// layout shows line by line (diffs, file contents, joined errors). A
// carriage return is always escaped: it would move the cursor back over
// what the line printed.
func Text(s string) string { return escape(s, true) }

// Lines splits s into lines and escapes each on its own as Text does
// (tabs kept: config files align with them), for renderers that indent or
// prefix every line (diffs, multi-line errors).
func Lines(s string) []string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Text(l)
	}
	return lines
}

func escape(s string, keepLayout bool) string {
	i := safeUpTo(s, keepLayout)
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case keepLayout && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case needsEscape(r):
			b.WriteString(quoteRune(r))
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// safeUpTo returns the length of the longest prefix of s that needs no
// escaping: the common case, all of s, costs one pass and no allocation.
func safeUpTo(s string, keepLayout bool) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				if !(keepLayout && (c == '\n' || c == '\t')) {
					return i
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size <= 1) || needsEscape(r) {
			return i
		}
		i += size
	}
	return len(s)
}

// needsEscape is true for runes a terminal acts on or that print as
// nothing: control characters, bidi controls and other format
// characters (zero-width joiners, BOM), line and paragraph separators.
func needsEscape(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) ||
		unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r) ||
		unicode.Is(unicode.Bidi_Control, r)
}

// quoteRune renders r the way Go quotes it, without the quotes.
func quoteRune(r rune) string {
	q := strconv.QuoteRuneToASCII(r)
	return q[1 : len(q)-1]
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}

// JSON rewrites an encoded JSON document so that the characters
// encoding/json leaves raw but a terminal acts on (C1 controls, bidi
// controls, other invisible format characters) appear as \u escapes. The
// document decodes to the same values: such characters only occur inside
// strings.
func JSON(doc []byte) []byte {
	i := jsonSafeUpTo(doc)
	if i == len(doc) {
		return doc
	}
	out := make([]byte, 0, len(doc)+32)
	out = append(out, doc[:i]...)
	for i < len(doc) {
		r, size := utf8.DecodeRune(doc[i:])
		if r >= utf8.RuneSelf && needsEscape(r) {
			for _, u := range utf16.Encode([]rune{r}) {
				out = fmt.Appendf(out, `\u%04x`, u)
			}
		} else {
			out = append(out, doc[i:i+size]...)
		}
		i += size
	}
	return out
}

func jsonSafeUpTo(doc []byte) int {
	for i := 0; i < len(doc); {
		if doc[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(doc[i:])
		if needsEscape(r) {
			return i
		}
		i += size
	}
	return len(doc)
}
