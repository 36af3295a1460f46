package expr

import (
	"strconv"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// span is a YAML scalar as yaml.v3 reports it: the position of its first
// token (quote, block indicator, tag or anchor), its style and its value.
// at maps a byte offset in the value back to the file, which is not
// simple arithmetic: quotes, escapes, line folding and block indentation
// all move characters around.
type span struct {
	line, col int
	style     yaml.Style
	text      string
	// direct: the text was given as is (Parse), with line/col at its first
	// character; offsets map 1:1 on each line.
	direct bool
}

// at returns the file line and column of byte offset off in the value.
// With src (the whole file) the scalar is re-scanned from its start and
// the value's characters are matched one by one against the source; only
// whitespace and escapes can differ between the two, so every
// non-blank character lands exactly. Without src, the answer is exact for
// single-line plain and quoted scalars and approximate otherwise.
func (s span) at(src []byte, off int) (line, col int) {
	if off < 0 {
		off = 0
	}
	if off > len(s.text) {
		off = len(s.text)
	}
	if src != nil && !s.direct {
		if l, c, ok := s.scan(src, off); ok {
			return l, c
		}
	}
	return s.approx(off)
}

func (s span) approx(off int) (line, col int) {
	before := s.text[:off]
	nl := 0
	last := -1
	for i := 0; i < len(before); i++ {
		if before[i] == '\n' {
			nl++
			last = i
		}
	}
	line, col = s.line, s.col
	if s.direct {
		if nl == 0 {
			return line, col + utf8.RuneCountInString(before)
		}
		return line + nl, 1 + utf8.RuneCountInString(before[last+1:])
	}
	switch {
	case s.style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		// Content starts on the next line, indented by an unknown amount:
		// the line is right for literal blocks, the column a guess.
		return line + 1 + nl, col + utf8.RuneCountInString(before[last+1:])
	case s.style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0:
		col++
	}
	if nl == 0 {
		return line, col + utf8.RuneCountInString(before)
	}
	return line + nl, 1 + utf8.RuneCountInString(before[last+1:])
}

// scan walks src from the scalar's first token and the value in step.
func (s span) scan(src []byte, off int) (line, col int, ok bool) {
	j, lineStart, ok := offsetOf(src, s.line, s.col)
	if !ok {
		return 0, 0, false
	}
	line = s.line
	pos := func() (int, int, bool) {
		return line, 1 + utf8.RuneCount(src[lineStart:j]), true
	}
	next := func() { // step over src[j]
		if src[j] == '\n' {
			line++
			lineStart = j + 1
		}
		j++
	}
	// Anchors and tags come before the scalar itself.
	for j < len(src) && (src[j] == '&' || src[j] == '!') {
		for j < len(src) && !isBlank(src[j]) {
			next()
		}
		for j < len(src) && isBlank(src[j]) {
			next()
		}
	}
	if j >= len(src) {
		return 0, 0, false
	}
	double := s.style&yaml.DoubleQuotedStyle != 0
	single := s.style&yaml.SingleQuotedStyle != 0
	switch {
	case double || single:
		if src[j] != '"' && src[j] != '\'' {
			return 0, 0, false
		}
		next()
	case s.style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		if src[j] != '|' && src[j] != '>' {
			return 0, 0, false
		}
		for j < len(src) && src[j] != '\n' { // header and its comment
			next()
		}
		if j < len(src) {
			next()
		}
	}
	v := s.text
	i := 0
	for j < len(src) {
		c := src[j]
		if double && c == '\\' {
			produced, n := unescape(src[j:])
			if n == 0 {
				return 0, 0, false
			}
			if produced == "" { // escaped line break: joins the lines
				for k := 0; k < n; k++ {
					next()
				}
				continue
			}
			if len(v)-i < len(produced) || v[i:i+len(produced)] != produced {
				return 0, 0, false
			}
			if off < i+len(produced) {
				return pos()
			}
			i += len(produced)
			for k := 0; k < n; k++ {
				next()
			}
			continue
		}
		if single && c == '\'' && j+1 < len(src) && src[j+1] == '\'' {
			if i >= len(v) || v[i] != '\'' {
				return 0, 0, false
			}
			if off == i {
				return pos()
			}
			i++
			next()
			next()
			continue
		}
		if i < len(v) && v[i] == c {
			if off == i {
				return pos()
			}
			i++
			next()
			continue
		}
		if i == len(v) && off == i {
			return pos()
		}
		if isSpace(c) { // indentation, folded line breaks, trailing blanks
			next()
			continue
		}
		if i < len(v) && isSpace(v[i]) { // a fold produced this blank
			if off == i {
				return pos()
			}
			i++
			continue
		}
		return 0, 0, false
	}
	if off == i {
		return pos()
	}
	return 0, 0, false
}

// offsetOf converts a 1-based line and rune column into a byte offset.
func offsetOf(src []byte, line, col int) (off, lineStart int, ok bool) {
	l := 1
	for off < len(src) && l < line {
		if src[off] == '\n' {
			l++
		}
		off++
	}
	if l != line {
		return 0, 0, false
	}
	lineStart = off
	for c := 1; c < col; c++ {
		if off >= len(src) || src[off] == '\n' {
			return 0, 0, false
		}
		_, n := utf8.DecodeRune(src[off:])
		off += n
	}
	return off, lineStart, true
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
func isSpace(c byte) bool { return isBlank(c) }

// unescape decodes one YAML double-quoted escape at the start of b and
// returns what it produces and how many source bytes it spans (0 if it
// is not a valid escape). An escaped line break produces nothing and
// also swallows the next line's indentation.
func unescape(b []byte) (string, int) {
	if len(b) < 2 || b[0] != '\\' {
		return "", 0
	}
	simple := map[byte]string{
		'0': "\x00", 'a': "\a", 'b': "\b", 't': "\t", '\t': "\t", 'n': "\n", 'v': "\v",
		'f': "\f", 'r': "\r", 'e': "\x1b", ' ': " ", '"': "\"", '/': "/", '\\': "\\",
		'N': "\u0085", '_': "\u00a0", 'L': "\u2028", 'P': "\u2029",
	}
	if s, ok := simple[b[1]]; ok {
		return s, 2
	}
	switch b[1] {
	case 'x', 'u', 'U':
		w := map[byte]int{'x': 2, 'u': 4, 'U': 8}[b[1]]
		if len(b) < 2+w {
			return "", 0
		}
		r, err := strconv.ParseUint(string(b[2:2+w]), 16, 32)
		if err != nil {
			return "", 0
		}
		return string(rune(r)), 2 + w
	case '\r', '\n':
		n := 2
		if b[1] == '\r' && len(b) > 2 && b[2] == '\n' {
			n = 3
		}
		for n < len(b) && (b[n] == ' ' || b[n] == '\t') {
			n++
		}
		// An escaped break produces nothing; the caller skips n bytes.
		return "", n
	}
	return "", 0
}
