package expr

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// ParseYAML parses a whole YAML file into its node tree, for loaders that
// need positions. It returns the root node of the single document (nil for
// an empty file). Every error names the file and, when the problem has
// one, the line (and column when known): malformed YAML, bytes YAML
// forbids, duplicate keys, more than one document, anchors that contain
// themselves or expand without bound.
func ParseYAML(file string, data []byte) (*yaml.Node, error) {
	if err := checkChars(file, data); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(file, data, err)
	}
	var second yaml.Node
	switch err := dec.Decode(&second); {
	case err == nil:
		return nil, &PosError{File: file, Line: second.Line, Msg: "only one YAML document is allowed per file"}
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(file, data, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if err := checkKeys(file, root, map[*yaml.Node]bool{}); err != nil {
		return nil, err
	}
	// Decoding into a generic value runs yaml's own guards against
	// self-containing anchors and alias bombs before any loader walks the
	// tree by hand.
	var generic any
	if err := doc.Decode(&generic); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if m := anchorRe.FindStringSubmatch(msg); m != nil {
			if n := findAnchor(root, m[1], map[*yaml.Node]bool{}); n != nil {
				return nil, &PosError{File: file, Line: n.Line, Column: n.Column, Msg: msg}
			}
		}
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			msg = te.Errors[0]
			if m := lineRe.FindStringSubmatch(msg); m != nil {
				l, _ := strconv.Atoi(m[1])
				return nil, &PosError{File: file, Line: l, Msg: m[2]}
			}
		}
		return nil, &PosError{File: file, Msg: msg}
	}
	return root, nil
}

var (
	lineRe   = regexp.MustCompile(`^line (\d+): (.*)$`)
	anchorRe = regexp.MustCompile(`^anchor '(.*)' value contains itself$`)
)

// syntaxError turns a yaml.v3 parse error into FILE:LINE: MSG. yaml.v3
// reports the line where the enclosing construct started (and nothing
// at all on the first line), so the line is found again by parsing
// growing prefixes of the file: the first prefix that fails with the same
// message ends on the offending line.
func syntaxError(file string, data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := lineRe.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if l := firstFailingLine(data, msg, line); l > 0 {
		line = l
	}
	if line == 0 {
		line = 1
	}
	if unknownAnchorRe.MatchString(msg) {
		// The library quotes the alias, which is the rest of the value:
		// an unquoted password that starts with *.
		msg = "a value that starts with * is a YAML alias, and no anchor has its name: quote the value"
	}
	return &PosError{File: file, Line: line, Msg: msg}
}

var unknownAnchorRe = regexp.MustCompile(`^unknown anchor '.*' referenced$`)

func firstFailingLine(data []byte, msg string, from int) int {
	const window = 100 // the real line is close to the reported one
	from--             // scanner errors report the exact line: allow one before
	if from < 1 {
		from = 1
	}
	ends := []int{} // ends[k-1] is the offset just past line k
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	for k := from; k <= len(ends) && k < from+window; k++ {
		if parseMsg(data[:ends[k-1]]) == msg {
			return k
		}
	}
	return 0
}

// parseMsg returns the message of the first parse error in data, or "".
func parseMsg(data []byte) string {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return ""
		}
		if err != nil {
			msg := strings.TrimPrefix(err.Error(), "yaml: ")
			if m := lineRe.FindStringSubmatch(msg); m != nil {
				msg = m[2]
			}
			return msg
		}
	}
}

// checkChars reports bytes YAML refuses, with their position: yaml.v3
// says only "control characters are not allowed".
func checkChars(file string, data []byte) error {
	if bytes.HasPrefix(data, []byte{0xFE, 0xFF}) || bytes.HasPrefix(data, []byte{0xFF, 0xFE}) {
		return nil // UTF-16: yaml.v3 decodes it itself
	}
	line, lineStart := 1, 0
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		col := 1 + utf8.RuneCount(data[lineStart:i])
		switch {
		case r == utf8.RuneError && n <= 1:
			return &PosError{File: file, Line: line, Column: col, Msg: "invalid UTF-8"}
		case r == '\n':
			line++
			lineStart = i + 1
		case r == '\t' || r == '\r' || r == 0x85 || r == 0xFEFF:
		case r < 0x20 || (r >= 0x7F && r < 0xA0) || r == 0xFFFE || r == 0xFFFF || (r >= 0xD800 && r <= 0xDFFF):
			return &PosError{File: file, Line: line, Column: col, Msg: fmt.Sprintf("control character %U is not allowed", r)}
		}
		i += n
	}
	return nil
}

// checkKeys refuses a key given twice in one mapping, naming both lines.
func checkKeys(file string, n *yaml.Node, seen map[*yaml.Node]bool) error {
	if n == nil || seen[n] {
		return nil
	}
	seen[n] = true
	if n.Kind == yaml.MappingNode {
		first := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				continue
			}
			if f, ok := first[k.Value]; ok {
				return &PosError{File: file, Line: k.Line, Column: k.Column,
					Msg: fmt.Sprintf("key %q is already defined at line %d", k.Value, f.Line)}
			}
			first[k.Value] = k
		}
	}
	for _, c := range n.Content {
		if err := checkKeys(file, c, seen); err != nil {
			return err
		}
	}
	return nil
}

func findAnchor(n *yaml.Node, name string, seen map[*yaml.Node]bool) *yaml.Node {
	if n == nil || seen[n] {
		return nil
	}
	seen[n] = true
	if n.Anchor == name && n.Kind != yaml.AliasNode {
		return n
	}
	for _, c := range n.Content {
		if f := findAnchor(c, name, seen); f != nil {
			return f
		}
	}
	return nil
}
