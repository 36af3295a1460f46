package facts

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Declared files (Set.Files) are read inside the gather round trip, so
// that a module's check finds them without a round trip of its own: the
// engine answers Target.ReadFile from what was read here while nothing on
// the host has been changed (engine/prefetch.go).
//
// A file is read here only where the engine's own ReadFile would read it
// as the same user with the same result (engine/transport/files.go,
// decide): when the gather runs as root, every directory from / down to
// the file's must be a real directory (not a link) owned by root, each
// one's parent writable by root alone or sticky, and the file's own
// directory writable by root alone; as any other user there is nothing to
// guard, as there. The file itself must be a regular file (not a link)
// of at most MaxPrefetchSize bytes. One stat(1), in the C locale, answers
// for every directory and file at once; the rest is shell builtins.
// Anything else (a link, a directory someone else controls, which ReadFile
// reads as that someone, a file too large, one that changed while it was
// read) is left out, and ReadFile reads it as before.
//
// Output, each line tagged as every gather line is, so no content can
// pass for framing:
//
//	ZN path          the file does not exist
//	ZF size path     the file's content starts (size from stat)
//	ZL text          a line of it, newline-terminated
//	ZT text          its last line, without a newline
//	ZE               the file's content ends
//
// Content is kept only when it is exactly size bytes and closed by ZE, for
// a path that was asked for, once: a file holding NUL bytes (which the
// shell drops) or one rewritten mid-read is left to ReadFile.

// MaxPrefetchSize bounds one prefetched file; larger files are read by
// ReadFile.
const MaxPrefetchSize = 64 << 10

// maxPrefetchFiles bounds how many files one gather reads.
const maxPrefetchFiles = 32

// PrefetchedFile is a declared file as the gather read it.
type PrefetchedFile struct {
	// Exists is false for a file the host does not have.
	Exists bool
	Data   []byte
}

// prefetchPath is what a declared file's path may look like: absolute,
// clean, no whitespace or shell-special characters (it is quoted into the
// script, and stat prints it back as the last word of a line).
var prefetchPath = regexp.MustCompile(`^(/[A-Za-z0-9._@+,=:-]+)+$`)

func prefetchable(p string) bool {
	return len(p) <= 1024 && prefetchPath.MatchString(p) && path.Clean(p) == p
}

// PrefetchFiles is every file the sets declare that can be prefetched,
// sorted, once each, at most maxPrefetchFiles.
func PrefetchFiles(sets []Set) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range sets {
		for _, p := range s.Files {
			if prefetchable(p) && !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	if len(out) > maxPrefetchFiles {
		out = out[:maxPrefetchFiles]
	}
	return out
}

// dirChain is the directories from / down to p's, outermost first.
func dirChain(p string) []string {
	dir := path.Dir(p)
	chain := []string{"/"}
	for i := 1; i < len(dir); i++ {
		if dir[i] == '/' {
			chain = append(chain, dir[:i])
		}
	}
	if dir != "/" {
		chain = append(chain, dir)
	}
	return chain
}

// filesFuncs defines zlook and zfile, with zuid the gather's own uid
// ($uid, read by gatherScript, which runs first). zlook NAME sets zu zm zt zs (uid,
// octal mode, raw hex mode, size) from stat's line for NAME in $zst:
// status 1 when there is none, 2 when it is not numbers (checked before
// any arithmetic, which would end the whole gather).
// zfile FILE DIR... prints FILE as above when its directories (DIR...,
// outermost first) pass decide's test.
var filesFuncs = `zuid=$uid
zlook() {
  while read -r zu zm zt zs zn; do
    if [ "$zn" = "$1" ]; then
      case $zu$zs in ''|*[!0-9]*) return 2;; esac
      case $zm in ''|*[!0-7]*) return 2;; esac
      case $zt in ''|*[!0-9a-f]*) return 2;; esac
      return 0
    fi
  done <<ZST
$zst
ZST
  return 1
}
zfile() {
  zf=$1
  shift
  case $zuid in ''|*[!0-9]*) return 0;; esac
  if [ "$zuid" = 0 ]; then
    zp=0
    for zd in "$@"; do
      zlook "$zd" || return 0
      [ $((0x$zt & 61440)) -eq 16384 ] || return 0
      [ "$zu" = 0 ] || return 0
      if [ $((0$zp & 022)) -ne 0 ] && [ $((0$zp & 01000)) -eq 0 ]; then return 0; fi
      zp=$zm
    done
    [ $((0$zp & 022)) -eq 0 ] || return 0
  fi
  zlook "$zf"
  case $? in 0) ;; 1) printf 'ZN %s\n' "$zf"; return 0;; *) return 0;; esac
  [ $((0x$zt & 61440)) -eq 32768 ] || return 0
  [ "$zs" -le ` + strconv.Itoa(MaxPrefetchSize) + ` ] 2>/dev/null || return 0
  { printf 'ZF %s %s\n' "$zs" "$zf"
    l=
    while IFS= read -r l; do printf 'ZL %s\n' "$l"; done
    if [ -n "$l" ]; then printf 'ZT %s\n' "$l"; fi
    echo ZE
  } 2>/dev/null < "$zf" || :
}
`

// filesScript reads files (PrefetchFiles) in the gather; "" when there
// are none. The paths are module declarations that passed prefetchable,
// quoted: never inventory or host data.
func filesScript(files []string) string {
	if len(files) == 0 {
		return ""
	}
	seen := map[string]bool{}
	var stat []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			stat = append(stat, shellQuote(p))
		}
	}
	var b strings.Builder
	b.WriteString(filesFuncs)
	for _, f := range files {
		for _, d := range dirChain(f) {
			add(d)
		}
		add(f)
	}
	fmt.Fprintf(&b, "zst=$(LC_ALL=C stat -c '%%u %%a %%f %%s %%n' -- %s 2>/dev/null)\n", strings.Join(stat, " "))
	for _, f := range files {
		q := make([]string, 0, 8)
		for _, d := range dirChain(f) {
			q = append(q, shellQuote(d))
		}
		fmt.Fprintf(&b, "zfile %s %s\n", shellQuote(f), strings.Join(q, " "))
	}
	return b.String()
}

// fileParser collects the Z lines of a gather's output.
type fileParser struct {
	want map[string]bool
	got  map[string]PrefetchedFile
	bad  map[string]bool
	// The file being read: its path, announced size, content so far;
	// tail is set once its last line without a newline came.
	open bool
	cur  string
	size int
	buf  []byte
	tail bool
}

func newFileParser(files []string) *fileParser {
	p := &fileParser{want: map[string]bool{}}
	for _, f := range files {
		p.want[f] = true
	}
	return p
}

// isFileTag says whether a gather line's tag is the files' (Z...).
func isFileTag(tag string) bool {
	switch tag {
	case "ZN", "ZF", "ZL", "ZT", "ZE":
		return true
	}
	return false
}

// line takes one Z line. Anything malformed drops the file it belongs to.
func (p *fileParser) line(tag, rest string) {
	switch tag {
	case "ZN":
		p.open = false
		p.add(rest, PrefetchedFile{})
	case "ZF":
		p.open = false
		sz, name, _ := strings.Cut(rest, " ")
		n, err := ParseInt("prefetched file size", sz, 0, MaxPrefetchSize)
		if err != nil || !p.want[name] {
			return
		}
		p.open, p.cur, p.size, p.buf, p.tail = true, name, int(n), make([]byte, 0, n), false
	case "ZL", "ZT":
		if !p.open {
			return
		}
		n := len(p.buf) + len(rest)
		if tag == "ZL" {
			n++
		}
		if p.tail || n > p.size {
			p.open = false // more than stat said, or a line after the last
			p.drop(p.cur)
			return
		}
		p.buf = append(p.buf, rest...)
		if tag == "ZL" {
			p.buf = append(p.buf, '\n')
		} else {
			p.tail = true
		}
	case "ZE":
		if !p.open {
			return
		}
		p.open = false
		if len(p.buf) != p.size {
			p.drop(p.cur) // changed while read, or NUL bytes the shell dropped
			return
		}
		p.add(p.cur, PrefetchedFile{Exists: true, Data: p.buf})
	}
}

// add keeps f for name: once; a second answer for the same path drops it.
func (p *fileParser) add(name string, f PrefetchedFile) {
	if !p.want[name] {
		return
	}
	if _, dup := p.got[name]; dup || p.bad[name] {
		p.drop(name)
		return
	}
	if p.got == nil {
		p.got = map[string]PrefetchedFile{}
	}
	p.got[name] = f
}

func (p *fileParser) drop(name string) {
	if p.bad == nil {
		p.bad = map[string]bool{}
	}
	p.bad[name] = true
	delete(p.got, name)
}

// files is what was read; nil when nothing was.
func (p *fileParser) files() map[string]PrefetchedFile {
	for name := range p.bad {
		delete(p.got, name)
	}
	return p.got
}
