package facts

import (
	"path"
	"sort"
	"strings"
)

// Sysctl configuration precedence.
//
// pgtune follows procps `sysctl --system`, which is what the seed setup
// runs by hand and what non-systemd boots run: the directories below are
// searched in this order, a file name found in an earlier directory masks
// the same name in later ones, the surviving files are applied sorted by
// file name (byte order, whatever their directory), and /etc/sysctl.conf is
// applied last of all. systemd-sysctl at boot uses the same directories,
// masking and sort, but never reads /etc/sysctl.conf itself; distributions
// link it in as /etc/sysctl.d/99-sysctl.conf, which both tools then apply at
// that position (procps applies it again at the end). Keeping both
// positions makes the order a superset of both tools': an assignment that
// overrides ours under either one is seen.
var SysctlDirs = []string{
	"/etc/sysctl.d",
	"/run/sysctl.d",
	"/usr/local/lib/sysctl.d",
	"/usr/lib/sysctl.d",
	"/lib/sysctl.d",
}

// SysctlConf is applied after every sysctl.d file by `sysctl --system`.
const SysctlConf = "/etc/sysctl.conf"

// SysctlFile is one configuration file as read from the host.
type SysctlFile struct {
	Path  string
	Lines []string
}

// OrderSysctlFiles drops masked files and returns the rest in application
// order. files may come in any order and may include /etc/sysctl.conf and
// files outside the known directories (those are ignored).
func OrderSysctlFiles(files []SysctlFile) []SysctlFile {
	byName := map[string]SysctlFile{}
	rank := map[string]int{}
	var conf *SysctlFile
	for i := range files {
		f := files[i]
		if f.Path == SysctlConf {
			conf = &files[i]
			continue
		}
		r := dirRank(path.Dir(f.Path))
		if r < 0 || !strings.HasSuffix(f.Path, ".conf") {
			continue
		}
		name := path.Base(f.Path)
		if old, ok := rank[name]; ok && old <= r {
			continue // masked by the same name in an earlier directory
		}
		byName[name], rank[name] = f, r
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]SysctlFile, 0, len(names)+1)
	for _, n := range names {
		out = append(out, byName[n])
	}
	if conf != nil {
		out = append(out, *conf)
	}
	return out
}

func dirRank(dir string) int {
	for i, d := range SysctlDirs {
		if d == dir {
			return i
		}
	}
	return -1
}

// ParseSysctlLine parses one line of a sysctl configuration file as both
// systemd-sysctl and procps read it: blank lines and lines whose first
// non-blank character is '#' or ';' are comments; a leading '-' on the key
// means "ignore errors"; the key and value are trimmed; keys may use '/' or
// '.' as separators. ok is false for comments and lines without '='.
func ParseSysctlLine(line string) (key, value string, ignoreErrors, ok bool) {
	s := strings.TrimSpace(line)
	if s == "" || s[0] == '#' || s[0] == ';' {
		return "", "", false, false
	}
	k, v, found := strings.Cut(s, "=")
	if !found {
		return "", "", false, false
	}
	k = strings.TrimSpace(k)
	if strings.HasPrefix(k, "-") {
		ignoreErrors = true
		k = strings.TrimSpace(k[1:])
	}
	if k == "" {
		return "", "", false, false
	}
	return NormalizeSysctlKey(k), strings.TrimSpace(v), ignoreErrors, true
}

// NormalizeSysctlKey returns the dotted form of a key. As sysctl.d(5)
// says, when the first separator is '/' the key is a path: slashes
// separate and dots are literal, so the two characters swap in the dotted
// form ("net/ipv4/conf/eth0.100/forwarding" is
// "net.ipv4.conf.eth0/100.forwarding").
func NormalizeSysctlKey(k string) string {
	k = strings.Trim(k, "/")
	i := strings.IndexAny(k, "./")
	if i < 0 || k[i] == '.' {
		return k
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '/':
			return '.'
		case '.':
			return '/'
		}
		return r
	}, k)
}

// keyMatches reports whether an assignment's key applies to key; sysctl.d
// keys may be glob patterns.
func keyMatches(pattern, key string) bool {
	if pattern == key {
		return true
	}
	if !strings.ContainsAny(pattern, "*?[") {
		return false
	}
	// path.Match treats '/' specially; the dotted form has none in the
	// keys pgtune manages, so '.' stands in as the separator.
	ok, err := path.Match(strings.ReplaceAll(pattern, ".", "/"), strings.ReplaceAll(key, ".", "/"))
	return err == nil && ok
}

// SysctlSettings returns the assignments of the given keys (globs that
// match them included) in the ordered files, in application order.
func SysctlSettings(files []SysctlFile, keys []string) []SysctlSetting {
	var out []SysctlSetting
	for _, f := range files {
		for i, line := range f.Lines {
			k, v, _, ok := ParseSysctlLine(line)
			if !ok {
				continue
			}
			for _, want := range keys {
				if keyMatches(k, want) {
					out = append(out, SysctlSetting{File: f.Path, Line: i + 1, Key: k, Value: v})
					break
				}
			}
		}
	}
	return out
}

// SysctlAssignments returns every assignment of key in the configuration
// files, in the order they are applied at boot.
func (f *Facts) SysctlAssignments(key string) []SysctlSetting {
	var out []SysctlSetting
	for _, s := range f.SysctlFiles {
		if keyMatches(s.Key, key) {
			out = append(out, s)
		}
	}
	return out
}

// SysctlWinner returns the assignment of key that wins at boot (the last
// one applied).
func (f *Facts) SysctlWinner(key string) (SysctlSetting, bool) {
	a := f.SysctlAssignments(key)
	if len(a) == 0 {
		return SysctlSetting{}, false
	}
	return a[len(a)-1], true
}

// SysctlOverrides returns the assignments of key by other files that are
// applied after own at boot, so that any of them with a different value
// would override it. own is the file pgtune writes; one outside the known
// directories (tests) is placed as if it were in /etc/sysctl.d. maskedBy is
// set when a same-named file in an earlier directory keeps own from being
// applied at all.
func (f *Facts) SysctlOverrides(key, own string) (later []SysctlSetting, maskedBy string) {
	ownName := path.Base(own)
	ownRank := dirRank(path.Dir(own))
	if ownRank < 0 {
		ownRank = 0
	}
	for _, s := range f.SysctlFiles {
		if s.File == own || s.File == SysctlConf || path.Base(s.File) != ownName {
			continue
		}
		if r := dirRank(path.Dir(s.File)); r >= 0 && r < ownRank {
			maskedBy = s.File
		}
	}
	for _, s := range f.SysctlAssignments(key) {
		if s.File == own {
			continue
		}
		if own == SysctlConf {
			continue // applied last: nothing comes after it
		}
		name := path.Base(s.File)
		if s.File == SysctlConf || name > ownName || (name == ownName && maskedBy != "") {
			later = append(later, s)
		}
	}
	return later, maskedBy
}

// CommentOutSysctlLines returns data with the given 1-based lines
// commented out, each prefixed with "# " and followed by note, so the
// original assignment stays readable in place.
func CommentOutSysctlLines(data []byte, lines []int, note string) []byte {
	want := map[int]bool{}
	for _, n := range lines {
		want[n] = true
	}
	parts := strings.SplitAfter(string(data), "\n")
	var b strings.Builder
	for i, p := range parts {
		if !want[i+1] {
			b.WriteString(p)
			continue
		}
		body := strings.TrimSuffix(p, "\n")
		b.WriteString("# " + body)
		if note != "" {
			b.WriteString("  # " + note)
		}
		if strings.HasSuffix(p, "\n") {
			b.WriteString("\n")
		}
	}
	return []byte(b.String())
}
