package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/internal/mask"
	"github.com/pgtune/pgtune/internal/termsafe"
)

// runExplain plans every host like check (changing nothing) and prints
// every policy value with its formula, the host's numbers put in, and
// what each module plans from them.
func (a *App) runExplain(o *options) int {
	o.planOnly = true
	ctx, stop := a.signalContext()
	defer stop()
	lv := a.newLive(o, "explain", report.ModeCheck, nil)
	s, err := a.plan(ctx, o, lv)
	if err != nil {
		return a.fail(err)
	}
	defer s.Close()
	lv.finish(s.Report("check"))
	code := 0
	for _, h := range s.Explain() {
		writeExplanation(a.Stdout, h)
		if h.Error != "" {
			code = 1
		}
	}
	if a.readInterrupted(ctx) {
		return exitInterrupted
	}
	return code
}

func writeExplanation(w io.Writer, h engine.HostExplanation) {
	line := func(indent int, format string, args ...any) {
		text := safeText(mask.Text(fmt.Sprintf(format, args...)))
		fmt.Fprintf(w, "%s%s\n", strings.Repeat("  ", indent), strings.ReplaceAll(text, "\n", "\n"+strings.Repeat("  ", indent+1)))
	}
	header := h.Name
	if mem, err := strconv.ParseInt(h.Facts["facts.mem_total"], 10, 64); err == nil {
		header += fmt.Sprintf(" (facts.mem_total = %s, facts.hugepage_size = %s)", bytesWithSize(mem), h.Facts["facts.hugepage_size"])
	}
	line(0, "%s", header)
	for _, m := range h.Modules {
		line(1, "%s", m.Module)
		for _, p := range m.Params {
			where := "default"
			if p.Pos != "" {
				where = p.Pos
			}
			if p.Error != "" {
				line(2, "%s = %s   [%s]", p.Key, p.Source, where)
				line(3, "error: %s", p.Error)
				continue
			}
			if p.Substituted == "" {
				line(2, "%s = %s   [%s]", p.Key, humanNumber(p.Result), where)
				continue
			}
			line(2, "%s = %s   [%s]", p.Key, p.Source, where)
			line(3, "= %s", p.Substituted)
			line(3, "= %s", humanNumber(p.Result))
			for _, op := range p.Operands {
				line(4, "%s = %s", op.Name, humanNumber(op.Value))
			}
		}
		for _, st := range m.Steps {
			line(2, "%s", st)
		}
		keys := make([]string, 0, len(m.Outputs))
		for k := range m.Outputs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			line(2, "output %s = %s", k, humanOutput(k, m.Outputs[k]))
		}
		for _, c := range report.FromPlan(m.Changes) {
			if c.Kind == "file" {
				line(2, "plans: %s %s", c.Action, c.Target)
				continue
			}
			line(2, "plans: %s: %s → %s", c.Target, orUnset(c.Before), c.After)
		}
		for _, n := range m.Notes {
			line(2, "note: %s", n)
		}
	}
	if h.Error != "" {
		line(1, "error: %s", strings.TrimPrefix(h.Error, h.Name+": "))
	}
	fmt.Fprintln(w)
}

// humanNumber adds a size to a whole number of bytes worth one: from 1 MiB.
func humanNumber(s string) string {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 1<<20 {
		return bytesWithSize(n)
	}
	return s
}

// humanOutput is humanNumber for a module output, by its unit: kB for
// *kbytes, none for page counts.
func humanOutput(name, value string) string {
	switch {
	case strings.HasSuffix(name, "kbytes"):
		if n, err := strconv.ParseInt(value, 10, 64); err == nil && n >= 1024 {
			return fmt.Sprintf("%d kB (%s)", n, report.Size(n*1024))
		}
		return value
	case strings.HasSuffix(name, "pages"):
		return value
	}
	return humanNumber(value)
}

func bytesWithSize(n int64) string { return fmt.Sprintf("%d (%s)", n, report.Size(n)) }

func orUnset(s string) string {
	if s == "" {
		return "(unset)"
	}
	return termsafe.Line(s)
}
