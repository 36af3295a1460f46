package thp

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
)

// Facts is what the module knows of a host's transparent huge pages,
// visible to expressions as facts.thp.
type Facts struct {
	// Enabled and Defrag are the modes in force (the bracketed word of
	// each file); "" when the kernel has no transparent huge pages.
	Enabled string `json:"enabled"`
	Defrag  string `json:"defrag"`
	// Writable says both files can be written with the gather's
	// privileges (false for a user without root, or a read-only /sys).
	Writable bool `json:"writable"`
	// Boot lists the systemd-tmpfiles entries that write either file at
	// boot, in every tmpfiles.d directory.
	Boot []BootEntry `json:"boot,omitempty"`
	// Files are the tmpfiles.d configuration files found, by directory
	// order then name: a name in an earlier directory masks it in later
	// ones.
	Files []string `json:"-"`
	// Own is the content of DefaultFile; OwnExists says there is one.
	Own       string `json:"-"`
	OwnExists bool   `json:"-"`
}

// BootEntry is one tmpfiles.d line writing a transparent huge page file.
type BootEntry struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	Path  string `json:"path"`
	Value string `json:"value"`
}

// TmpfilesDirs are where systemd-tmpfiles reads configuration, in order
// of precedence.
var TmpfilesDirs = []string{"/etc/tmpfiles.d", "/run/tmpfiles.d", "/usr/local/lib/tmpfiles.d", "/usr/lib/tmpfiles.d", "/lib/tmpfiles.d"}

// factsScript prints, one tagged line each: "v NAME CONTENT" for each
// setting file, "w NAME" when it is writable, "f PATH" for each tmpfiles.d
// file, "l N:LINE" for its lines naming a setting, "o N:LINE" for every
// line of DefaultFile.
//
// One grep finds the tmpfiles.d files that name a setting file; only
// those are read line by line, with the shell's own read (a process per
// file, dozens on a stock system, was most of the gather's cost once; the
// shell reading every file a byte at a time was the next).
const factsScript = `d=` + Dir + `
# lines TAG FILE [PATTERN]: "TAG N:LINE" for each line of FILE (holding
# PATTERN, when given).
lines() {
  n=0
  while IFS= read -r l || [ -n "$l" ]; do
    n=$((n+1))
    case $l in *"$3"*) printf '%s %d:%s\n' "$1" "$n" "$l";; esac
  done 2>/dev/null < "$2"
}
for n in enabled defrag; do
  if [ -r "$d/$n" ]; then v=; IFS= read -r v < "$d/$n"; printf 'v %s %s\n' "$n" "$v"; fi
  if [ -w "$d/$n" ]; then printf 'w %s\n' "$n"; fi
done
set --
for dir in /etc/tmpfiles.d /run/tmpfiles.d /usr/local/lib/tmpfiles.d /usr/lib/tmpfiles.d /lib/tmpfiles.d; do
  for c in "$dir"/*.conf; do
    [ -f "$c" ] && set -- "$@" "$c"
  done
done
has=
if [ $# -gt 0 ]; then has=$(grep -l -F -e "$d/" -- "$@" 2>/dev/null); fi
nl='
'
for c in "$@"; do
  printf 'f %s\n' "$c"
  case $nl$has$nl in *"$nl$c$nl"*) lines l "$c" "$d/";; esac
done
if [ -f ` + DefaultFile + ` ]; then
  echo own
  lines o ` + DefaultFile + `
fi
`

// FactSet declares the module's facts: gathered with the others, parsed
// by parseFacts.
func (*Module) FactSet() facts.Set {
	return facts.Set{Name: Name, Script: factsScript, Parse: func(out []byte) (any, error) { return parseFacts(out) }}
}

// modeWord is what a mode in a setting file looks like.
var modeWord = regexp.MustCompile(`^\[?[a-z+]{1,32}\]?$`)

// maxLines bounds what a host may send back.
const maxLines = 10000

// parseFacts reads the snippet's output. It comes from the host: modes
// must be words, line numbers in range, paths clean.
func parseFacts(out []byte) (*Facts, error) {
	f := &Facts{}
	writable := map[string]bool{}
	var own []string
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) > maxLines {
		return nil, fmt.Errorf("%d lines, more than %d", len(lines), maxLines)
	}
	cur := ""
	for _, line := range lines {
		tag, rest, _ := strings.Cut(line, " ")
		switch tag {
		case "v":
			name, content, _ := strings.Cut(rest, " ")
			mode, err := selected(name, content)
			if err != nil {
				return nil, err
			}
			switch name {
			case "enabled":
				f.Enabled = mode
			case "defrag":
				f.Defrag = mode
			}
		case "w":
			writable[rest] = true
		case "f":
			if !path.IsAbs(rest) || path.Clean(rest) != rest {
				return nil, fmt.Errorf("tmpfiles.d file %q is not a clean path", transport.Clip(rest))
			}
			cur = rest
			f.Files = append(f.Files, rest)
		case "l":
			n, text, err := numbered(rest)
			if err != nil || cur == "" {
				return nil, fmt.Errorf("tmpfiles.d line %q: not a numbered line of a file", transport.Clip(rest))
			}
			if e, ok := parseTmpfilesLine(text); ok {
				e.File, e.Line = cur, n
				f.Boot = append(f.Boot, e)
			}
		case "own":
			f.OwnExists = true
		case "o":
			n, text, err := numbered(rest)
			if err != nil || n != len(own)+1 {
				return nil, fmt.Errorf("%s line %q: not the next numbered line", DefaultFile, transport.Clip(rest))
			}
			own = append(own, text)
		case "":
		default:
			return nil, fmt.Errorf("unexpected line %q", transport.Clip(line))
		}
	}
	if len(own) > 0 {
		f.Own = strings.Join(own, "\n") + "\n"
	}
	f.Writable = f.Enabled != "" && writable["enabled"] && writable["defrag"]
	return f, nil
}

// selected is the mode a setting file's content puts in force, checked to
// be one of the words it offers.
func selected(name, content string) (string, error) {
	words := strings.Fields(content)
	if (name != "enabled" && name != "defrag") || len(words) == 0 || len(words) > 8 {
		return "", fmt.Errorf("%s: %q is not a list of modes", name, content)
	}
	for _, w := range words {
		if !modeWord.MatchString(w) {
			return "", fmt.Errorf("%s: %q is not a mode", name, w)
		}
	}
	mode := engine.SysfsValue(content)
	if mode == strings.TrimSpace(content) {
		return "", fmt.Errorf("%s: no mode in force in %q", name, content)
	}
	return mode, nil
}

// numbered splits grep -n's "N:text".
func numbered(s string) (int, string, error) {
	ns, text, ok := strings.Cut(s, ":")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 1 || n > maxLines {
		return 0, "", fmt.Errorf("bad line number")
	}
	return n, text, nil
}

// parseTmpfilesLine reads a "w" (write) line for one of the setting
// files: type, path, mode, user, group, age, argument. Other lines that
// name the files (comments, other types) are not boot writes.
func parseTmpfilesLine(line string) (BootEntry, bool) {
	fields := strings.Fields(line)
	if len(fields) < 2 || strings.TrimRight(fields[0], "+!-=~^") != "w" {
		return BootEntry{}, false
	}
	p := fields[1]
	if p != EnabledPath && p != DefragPath {
		return BootEntry{}, false
	}
	value := ""
	if len(fields) > 6 {
		value = fields[6]
	}
	return BootEntry{Path: p, Value: value}, true
}
