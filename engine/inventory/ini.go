package inventory

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine/expr"
)

// The INI dialect is Ansible's own (not Windows INI: host lines carry
// shell-quoted key=value pairs, values are Python literals), so it is read
// here; no maintained Go library reads it.

var (
	// iniHeader is [group], [group:vars] or [group:children], with an
	// optional trailing comment.
	iniHeader = regexp.MustCompile(`^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$`)
	// iniGroupName is a line of a [group:children] section.
	iniGroupName = regexp.MustCompile(`^([^:\]\s]+)\s*(?:#.*)?$`)
)

// iniPending is a group named before it is defined: in [parent:children]
// or as [group:vars]. Ansible requires the definition somewhere in the file.
type iniPending struct {
	line    int
	state   string
	parents []string
}

// parseINI reads an Ansible INI inventory: hosts before any header are
// ungrouped; [group] lists hosts (with ranges and inline key=value vars),
// [group:vars] key=value lines, [group:children] group names.
func (p *parser) parseINI(data []byte) error {
	pending := map[string]*iniPending{}
	pendingOrder := []string{}
	group, state := "ungrouped", "hosts"
	before := len(p.hostOrder)
	for i, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(raw)
		lineNo := i + 1
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		errorf := func(format string, args ...any) error {
			return &expr.PosError{File: p.file, Line: lineNo, Msg: fmt.Sprintf(format, args...)}
		}
		if err := checkText("line", line); err != nil {
			return errorf("%v", err)
		}
		if m := iniHeader.FindStringSubmatch(line); m != nil {
			group, state = m[1], m[2]
			if state == "" {
				state = "hosts"
			}
			if state != "hosts" && state != "vars" && state != "children" {
				return errorf("section [%s:%s] has unknown type %q (expected [%s], [%s:vars] or [%s:children])", group, state, state, group, group, group)
			}
			if _, ok := p.groups[group]; !ok {
				if state == "vars" && pending[group] == nil {
					pending[group] = &iniPending{line: lineNo, state: state}
					pendingOrder = append(pendingOrder, group)
				}
				p.group(group, lineNo)
			}
			if pd := pending[group]; pd != nil && state != "vars" {
				for _, parent := range pd.parents {
					p.link(parent, group)
				}
				delete(pending, group)
			}
			continue
		}
		if line[0] == '[' && line[len(line)-1] == ']' {
			return errorf("invalid section %s: a header is [group], [group:vars] or [group:children], without spaces", line)
		}
		switch state {
		case "hosts":
			if group == "ungrouped" {
				p.group("ungrouped", lineNo)
			}
			if err := p.iniHostLine(group, line, lineNo); err != nil {
				return err
			}
		case "vars":
			k, v, ok := strings.Cut(line, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				// Only the first word: the rest may be a password
				// (ansible_become_pass s3cret, a space for the =).
				return errorf("expected key=value in [%s:vars], got a line without = that starts %s", group, strconv.Quote(strings.Fields(line)[0]))
			}
			d, err := p.checkDef(varDef{key: k, value: pythonLiteral(strings.TrimSpace(v)), file: p.file, line: lineNo})
			if err != nil {
				return err
			}
			p.groupVars[group] = append(p.groupVars[group], d)
		case "children":
			m := iniGroupName.FindStringSubmatch(line)
			if m == nil {
				return errorf("expected a group name in [%s:children], got %s", group, strconv.Quote(line))
			}
			child := m[1]
			if child == "all" {
				return errorf(`group "all" cannot be a child of %q`, group)
			}
			if _, ok := p.groups[child]; ok {
				p.link(group, child)
				continue
			}
			if pending[child] == nil {
				pending[child] = &iniPending{line: lineNo, state: "children"}
				pendingOrder = append(pendingOrder, child)
			}
			pending[child].parents = append(pending[child].parents, group)
		}
	}
	for _, name := range pendingOrder {
		pd := pending[name]
		if pd == nil {
			continue
		}
		if pd.state == "vars" {
			return &expr.PosError{File: p.file, Line: pd.line, Msg: fmt.Sprintf("[%s:vars] is for a group that is not defined (add a [%s] section)", name, name)}
		}
		return &expr.PosError{File: p.file, Line: pd.line,
			Msg: fmt.Sprintf("[%s:children] names group %q, which is not defined (add a [%s] or [%s:children] section)", pd.parents[len(pd.parents)-1], name, name, name)}
	}
	if len(p.hostOrder) == before {
		return &expr.PosError{File: p.file, Line: 1, Msg: "inventory has no hosts"}
	}
	return nil
}

// iniHostLine reads "PATTERN [key=value ...]" with shell quoting and a
// trailing # comment.
func (p *parser) iniHostLine(group, line string, lineNo int) error {
	errorf := func(format string, args ...any) error {
		return &expr.PosError{File: p.file, Line: lineNo, Msg: fmt.Sprintf(format, args...)}
	}
	words, err := shellWords(line, true)
	if err != nil {
		return errorf("host line %s: %v", strconv.Quote(line), err)
	}
	if len(words) == 0 {
		return nil
	}
	names, port, err := expandHost(words[0])
	if err != nil {
		return errorf("host %q: %v", words[0], err)
	}
	var defs []varDef
	if port != "" {
		d, err := p.checkDef(varDef{key: "ansible_port", value: portValue(port), file: p.file, line: lineNo})
		if err != nil {
			return err
		}
		defs = append(defs, d)
	}
	for i, w := range words[1:] {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			if prev := words[i]; i > 0 && strings.HasSuffix(prev, "=") {
				// Not the word: it is the value of the key before it
				// (ansible_password= s3cret), maybe a password.
				return errorf("host %q: a space after %s: write key=value with no space around =", words[0], strconv.Quote(prev))
			}
			return errorf("host %q: expected key=value after the host name, got %s", words[0], strconv.Quote(w))
		}
		d, err := p.checkDef(varDef{key: k, value: pythonLiteral(v), file: p.file, line: lineNo})
		if err != nil {
			return err
		}
		defs = append(defs, d)
	}
	p.group(group, lineNo)
	for _, n := range names {
		if err := p.addHost(group, n, lineNo, defs); err != nil {
			return err
		}
	}
	return nil
}

// shellWords splits s into words as a POSIX shell does for quoting
// (Python's shlex.split, which Ansible uses): single quotes are literal,
// double quotes and backslashes escape. With comments, an unquoted #
// ends the line, anywhere in a word.
func shellWords(s string, comments bool) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '#' && comments:
			i = len(s)
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("no closing quotation")
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("no closing quotation")
			}
			inWord = true
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("no escaped character")
			}
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
