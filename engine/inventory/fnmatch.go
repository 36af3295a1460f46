package inventory

import (
	"fmt"
	"regexp"
	"strings"
)

// globRegexp compiles a shell glob the way Ansible reads host patterns:
// Python's fnmatch.translate, matched case-sensitively against the whole
// name. So "*" and "?" match any character ("." and "/" included), a set
// is negated by "!" (not "^", which is a member there), a "]" first in a
// set and a "-" first or last are members, a backslash is an ordinary
// character, a reversed range (z-a) is dropped, and a "[" without its "]"
// is a literal "[". Go's path.Match differs on most of these: with it
// "db[!1]*" picked db1, where Ansible picks every db but db1.
func globRegexp(glob string) (*regexp.Regexp, error) {
	p := []rune(glob)
	var re strings.Builder
	re.WriteString(`^(?s:`)
	for i := 0; i < len(p); {
		c := p[i]
		i++
		switch c {
		case '*':
			for i < len(p) && p[i] == '*' {
				i++
			}
			re.WriteString(`.*`)
		case '?':
			re.WriteString(`.`)
		case '[':
			j := i
			if j < len(p) && p[j] == '!' {
				j++
			}
			if j < len(p) && p[j] == ']' {
				j++
			}
			for j < len(p) && p[j] != ']' {
				j++
			}
			if j >= len(p) {
				re.WriteString(`\[`)
				continue
			}
			re.WriteString(globSet(p, i, j))
			i = j + 1
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString(`)$`)
	return regexp.Compile(re.String())
}

// globSet renders the set p[i:j] (between "[" and "]") as a Go class, with
// fnmatch's reading of "-": a "-" right after "[" or "[!" is a member, a
// later "-" joins the characters either side into a range, and the "-"
// right after a range is a member again.
func globSet(p []rune, i, j int) string {
	// chunks are the set's text split at the "-" that make ranges: a
	// range runs from one chunk's last character to the next one's first.
	var chunks [][]rune
	k := i + 1
	if p[i] == '!' {
		k = i + 2
	}
	for {
		d := -1
		for x := k; x < j; x++ {
			if p[x] == '-' {
				d = x
				break
			}
		}
		if d < 0 {
			break
		}
		chunks = append(chunks, p[i:d])
		i, k = d+1, d+3
	}
	if rest := p[i:j]; len(rest) > 0 || len(chunks) == 0 {
		chunks = append(chunks, rest)
	} else {
		last := len(chunks) - 1
		chunks[last] = append(chunks[last][:len(chunks[last]):len(chunks[last])], '-')
	}
	// A reversed range goes, both its ends with it (fnmatch drops it
	// where a regexp would fail).
	for k := len(chunks) - 1; k > 0; k-- {
		a, b := chunks[k-1], chunks[k]
		if a[len(a)-1] > b[0] {
			chunks[k-1] = append(a[:len(a)-1:len(a)-1], b[1:]...)
			chunks = append(chunks[:k], chunks[k+1:]...)
		}
	}
	if len(chunks) == 1 && len(chunks[0]) == 0 {
		return `[^\x00-\x{10FFFF}]` // an empty set matches nothing
	}
	negate := chunks[0][0] == '!'
	if negate {
		chunks[0] = chunks[0][1:]
	}
	if negate && len(chunks) == 1 && len(chunks[0]) == 0 {
		return `.` // a negated empty set matches any character
	}
	var class strings.Builder
	class.WriteString("[")
	if negate {
		class.WriteString("^")
	}
	for n, c := range chunks {
		for x, r := range c {
			if n > 0 && x == 0 {
				fmt.Fprintf(&class, `-\x{%x}`, r) // a range's end
				continue
			}
			fmt.Fprintf(&class, `\x{%x}`, r)
		}
	}
	class.WriteString("]")
	return class.String()
}
