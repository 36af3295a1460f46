package facts

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Numbers read from a host are input, possibly hostile: each is parsed
// with the range its meaning allows before anything sizes, allocates or
// multiplies with it. The bounds are far beyond any real machine and far
// below what would overflow int64 arithmetic on them.
const (
	// MaxBytes bounds a memory size in bytes (1 EiB).
	MaxBytes = 1 << 60
	// MaxKB bounds a size in kB (/proc/meminfo, /proc/PID/status).
	MaxKB = MaxBytes >> 10
	// MaxPages bounds a page count (huge page pools, segment pages).
	MaxPages = 1 << 40
	// MaxPID is the kernel's PID_MAX_LIMIT on 64-bit (2^22).
	MaxPID = 1 << 22
	// MaxNUMANode is the highest NUMA node number (MAX_NUMNODES − 1).
	MaxNUMANode = 1<<10 - 1
)

// RangeError reports a number from a host that is not a number or lies
// outside what its meaning allows. It never quotes more than a few bytes
// of what the host sent.
type RangeError struct {
	What     string // what the value means: "stat size", "meminfo MemTotal"
	Value    string // as the host sent it, cut short
	Min, Max int64
	NaN      bool // not a decimal integer at all
}

func (e *RangeError) Error() string {
	what := escaped(e.What) // may hold a name the host sent (a meminfo key)
	if e.NaN {
		return fmt.Sprintf("%s %q is not a number", what, e.Value)
	}
	return fmt.Sprintf("%s %s out of range [%d, %d]", what, escaped(e.Value), e.Min, e.Max)
}

// escaped shows control characters and invalid UTF-8 as Go escapes.
func escaped(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			q := strconv.Quote(s)
			return q[1 : len(q)-1]
		}
	}
	return s
}

// maxQuoted is how much of a bad value an error repeats.
const maxQuoted = 32

// ParseInt reads a decimal integer the host sent for what, which must lie
// in [min, max]. Surrounding blanks are ignored.
func ParseInt(what, s string, min, max int64) (int64, error) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	shown := s
	if len(shown) > maxQuoted {
		shown = shown[:maxQuoted] + "…"
	}
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, &RangeError{What: what, Value: shown, Min: min, Max: max}
		}
		return 0, &RangeError{What: what, Value: shown, Min: min, Max: max, NaN: true}
	}
	if n < min || n > max {
		return 0, &RangeError{What: what, Value: shown, Min: min, Max: max}
	}
	return n, nil
}
