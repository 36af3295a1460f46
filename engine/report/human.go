package report

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Mode is what a report is about.
type Mode string

const (
	ModeCheck    Mode = "check"    // a plan: nothing was changed
	ModeApply    Mode = "apply"    // changes made and verified
	ModeRollback Mode = "rollback" // a rollback's outcome
)

// humanize puts a value's size beside the raw value a person checks
// against the host: "3013 pages (5.9 GiB)", "16353123 (15.6 GiB)",
// "shared_buffers=6010880kB (5.7 GiB)". Values it does not recognise come
// back unchanged.
func humanize(target, value string, hugePageSize int64) string {
	n, err := strconv.ParseInt(value, 10, 64)
	switch {
	case err != nil:
		return humanizeSettings(value)
	case n == 0:
		return value
	case strings.HasSuffix(target, "nr_hugepages") && poolPageSize(target, hugePageSize) > 0:
		return fmt.Sprintf("%s (%s)", plural(int(n), "page"), Size(n*poolPageSize(target, hugePageSize)))
	case strings.HasSuffix(target, "nr_hugepages"):
		return plural(int(n), "page")
	case strings.HasSuffix(target, "_kbytes") && n > 0:
		return fmt.Sprintf("%d (%s)", n, Size(n*1024))
	case strings.HasSuffix(target, "_bytes") && n >= 1024:
		return fmt.Sprintf("%d (%s)", n, Size(n))
	}
	return value
}

// poolDir is a huge page pool's sysfs directory, which names its page
// size in kB.
var poolDir = regexp.MustCompile(`/hugepages-([0-9]+)kB/nr_hugepages$`)

// poolPageSize is the page size of the pool whose nr_hugepages target
// is: the size its sysfs path names (a 1 GiB pool is not counted in the
// default size), else the kernel's default.
func poolPageSize(target string, defaultSize int64) int64 {
	if m := poolDir.FindStringSubmatch(target); m != nil {
		if kb, err := strconv.ParseInt(m[1], 10, 64); err == nil && kb > 0 && kb <= 1<<40 {
			return kb << 10
		}
	}
	return defaultSize
}

// humanizeSettings adds the size after every NkB or NMB setting in a
// line of "name=value" words (what a restart change shows), where a
// binary unit reads better: from 1 MiB for kB, from 1 GiB for MB.
func humanizeSettings(value string) string {
	words := strings.Fields(value)
	changed := false
	for i, w := range words {
		_, v, ok := strings.Cut(w, "=")
		if !ok {
			continue
		}
		for _, u := range []struct {
			suffix string
			mult   int64
		}{{"kB", 1 << 10}, {"MB", 1 << 20}} {
			num, found := strings.CutSuffix(v, u.suffix)
			if !found {
				continue
			}
			// Small values read well as they are.
			if n, err := strconv.ParseInt(num, 10, 64); err == nil && (u.suffix == "kB" && n >= 1024 || n*u.mult >= 1<<30) {
				words[i] = fmt.Sprintf("%s (%s)", w, Size(n*u.mult))
				changed = true
			}
		}
	}
	if !changed {
		return value
	}
	return strings.Join(words, " ")
}

// Size renders bytes in binary units, one decimal, exact where whole.
func Size(b int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f := float64(b)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	s := strings.TrimSuffix(fmt.Sprintf("%.1f", f), ".0")
	return s + " " + units[i]
}
