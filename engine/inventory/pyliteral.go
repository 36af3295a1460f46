package inventory

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// pythonLiteral reads an INI value the way Ansible does (Python's
// ast.literal_eval, falling back to the text itself): numbers, True,
// False, None, quoted strings, lists, tuples and dicts of those.
func pythonLiteral(s string) any {
	l := &pyLexer{s: s}
	v, ok := l.value()
	if ok && l.peek() == ',' {
		// 5432,6432 is a tuple in Python: a list here.
		items := []any{v}
		for ok && l.peek() == ',' {
			l.i++
			if l.peek() == 0 || l.peek() == '#' {
				break
			}
			v, ok = l.value()
			items = append(items, v)
		}
		v = items
	}
	l.space()
	if l.i < len(l.s) && l.s[l.i] == '#' {
		l.i = len(l.s) // Python ignores a comment after the literal
	}
	if !ok || l.i != len(l.s) {
		return s
	}
	return v
}

type pyLexer struct {
	s string
	i int
}

func (l *pyLexer) space() {
	for l.i < len(l.s) && (l.s[l.i] == ' ' || l.s[l.i] == '\t') {
		l.i++
	}
}

func (l *pyLexer) peek() byte {
	l.space()
	if l.i < len(l.s) {
		return l.s[l.i]
	}
	return 0
}

func (l *pyLexer) value() (any, bool) {
	switch c := l.peek(); {
	case c == '\'' || c == '"':
		return l.str()
	case c == '[':
		return l.seq(']')
	case c == '(':
		return l.seq(')')
	case c == '{':
		return l.dict()
	case c == 0:
		return nil, false
	}
	start := l.i
	for l.i < len(l.s) && strings.IndexByte(" \t,:]})", l.s[l.i]) < 0 {
		l.i++
	}
	word := l.s[start:l.i]
	switch word {
	case "True":
		return true, true
	case "False":
		return false, true
	case "None":
		return nil, true
	}
	return pyNumber(word)
}

// pyNumber reads a Python int or float literal, with an optional sign.
func pyNumber(w string) (any, bool) {
	sign := ""
	if w != "" && (w[0] == '-' || w[0] == '+') {
		sign, w = w[:1], w[1:]
	}
	if w == "" || strings.HasPrefix(w, "_") || strings.HasSuffix(w, "_") || strings.Contains(w, "__") {
		return nil, false
	}
	digits := strings.ReplaceAll(w, "_", "")
	lower := strings.ToLower(digits)
	if len(lower) > 2 && lower[0] == '0' && strings.IndexByte("xob", lower[1]) >= 0 {
		base := map[byte]int{'x': 16, 'o': 8, 'b': 2}[lower[1]]
		return pyInt(sign+lower[2:], base)
	}
	if strings.ContainsAny(lower, ".e") && !strings.ContainsAny(lower, "x") {
		if strings.ContainsAny(lower, "abcdfghijklmnopqrstuvwxyz") && !strings.Contains(lower, "e") {
			return nil, false
		}
		f, err := strconv.ParseFloat(sign+digits, 64)
		if err != nil || strings.Contains(lower, "inf") || strings.Contains(lower, "nan") {
			return nil, false
		}
		return f, true
	}
	// Python 3 refuses leading zeros in a decimal int ("0755").
	if len(digits) > 1 && digits[0] == '0' && strings.Trim(digits, "0") != "" {
		return nil, false
	}
	return pyInt(sign+digits, 10)
}

func pyInt(s string, base int) (any, bool) {
	n, ok := new(big.Int).SetString(s, base)
	if !ok {
		return nil, false
	}
	if n.IsInt64() && n.Int64() >= int64(minInt) && n.Int64() <= int64(maxInt) {
		return int(n.Int64()), true
	}
	f, _ := new(big.Float).SetInt(n).Float64() // still a number, as YAML decodes it
	return f, true
}

const (
	maxInt = int(^uint(0) >> 1)
	minInt = -maxInt - 1
)

func (l *pyLexer) str() (any, bool) {
	q := l.s[l.i]
	l.i++
	var b strings.Builder
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == q:
			l.i++
			return b.String(), true
		case c == '\\' && l.i+1 < len(l.s):
			l.i++
			switch e := l.s[l.i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case '\\', '\'', '"':
				b.WriteByte(e)
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
		l.i++
	}
	return nil, false
}

func (l *pyLexer) seq(end byte) (any, bool) {
	l.i++
	out := []any{}
	for {
		if l.peek() == end {
			l.i++
			return out, true
		}
		v, ok := l.value()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		switch l.peek() {
		case ',':
			l.i++
		case end:
		default:
			return nil, false
		}
	}
}

func (l *pyLexer) dict() (any, bool) {
	l.i++
	out := map[string]any{}
	for {
		if l.peek() == '}' {
			l.i++
			return out, true
		}
		k, ok := l.value()
		if !ok || l.peek() != ':' {
			return nil, false
		}
		l.i++
		v, ok := l.value()
		if !ok {
			return nil, false
		}
		out[pyKey(k)] = v
		switch l.peek() {
		case ',':
			l.i++
		case '}':
		default:
			return nil, false
		}
	}
}

// pyKey is how Ansible shows a non-string dict key once in JSON.
func pyKey(k any) string {
	switch t := k.(type) {
	case string:
		return t
	case nil:
		return "null"
	case float64:
		return strconv.FormatFloat(t, 'g', -1, 64)
	}
	return fmt.Sprint(k)
}
