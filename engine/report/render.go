package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/pgtune/pgtune/internal/mask"
	"github.com/pgtune/pgtune/internal/termsafe"
)

// WriteJSON writes the report as one JSON document. encoding/json escapes
// C0 controls; termsafe.JSON escapes what it leaves raw (C1 and bidi
// controls), so the document is safe to print as it is.
func WriteJSON(w io.Writer, r *Report) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(maskNotes(r)); err != nil {
		return err
	}
	_, err := w.Write(termsafe.JSON(buf.Bytes()))
	return err
}

// WriteText writes the report for a person: per host each change with
// before → after and file diffs, notes and errors, then a recap line per
// host in the style of Ansible's PLAY RECAP. Every text that came from a
// host (targets, values, diffs, notes, errors) is escaped with termsafe,
// so none of it can move the cursor or rewrite a line already printed.
func WriteText(w io.Writer, r *Report) error {
	r = maskNotes(r)
	var b strings.Builder
	for _, h := range r.Hosts {
		fmt.Fprintf(&b, "%s: %s\n", termsafe.Line(h.Name), headline(r.Mode, h))
		for _, c := range h.Changes {
			writeChange(&b, c)
		}
		for _, n := range h.Notes {
			fmt.Fprintf(&b, "  note: %s\n", strings.Join(termsafe.Lines(n), "\n        "))
		}
		if h.Error != nil {
			fmt.Fprintf(&b, "  error: %s\n", strings.Join(termsafe.Lines(*h.Error), "\n    "))
		}
		b.WriteString("\n")
	}
	writeRecap(&b, r)
	_, err := io.WriteString(w, b.String())
	return err
}

// maskNotes returns r with the secrets in notes and errors masked by their
// structure, whoever built it (FromPlan masks changes): the writers are
// the last place before output. r itself is left alone.
func maskNotes(r *Report) *Report {
	out := *r
	out.Hosts = make([]Host, len(r.Hosts))
	for i, h := range r.Hosts {
		if h.Error != nil {
			e := mask.Text(*h.Error)
			h.Error = &e
		}
		if len(h.Notes) > 0 {
			notes := make([]string, len(h.Notes))
			for j, n := range h.Notes {
				notes[j] = mask.Text(n)
			}
			h.Notes = notes
		}
		out.Hosts[i] = h
	}
	return &out
}

func headline(mode string, h Host) string {
	n := len(h.Changes)
	switch h.Status {
	case InPolicy:
		return "in policy"
	case OK:
		return "ok, nothing to change (verified)"
	case Drift:
		return fmt.Sprintf("drift, %s to make", plural(n, "change"))
	case Changed:
		return fmt.Sprintf("changed, %s made and verified", plural(n, "change"))
	case Unreachable:
		return "UNREACHABLE"
	case Skipped:
		return "skipped, left untouched"
	case Failed:
		if mode == "check" && n > 0 {
			return fmt.Sprintf("FAILED (with %s planned before the failure)", plural(n, "change"))
		}
		return "FAILED"
	}
	return string(h.Status)
}

func writeChange(b *strings.Builder, c Change) {
	module, target := termsafe.Line(c.Module), termsafe.Line(c.Target)
	switch {
	case c.Kind == "file" && c.Diff != "":
		fmt.Fprintf(b, "  ~ %-10s %s\n", module, target)
		// Line by line: a diff keeps its layout, and nothing inside a
		// line (a tab, a carriage return) can reach the terminal raw.
		b.WriteString(indent(termsafe.Lines(strings.TrimRight(c.Diff, "\n")), "      "))
		b.WriteString("\n")
	case c.Kind == "file":
		fmt.Fprintf(b, "  ~ %-10s %s (%s)\n", module, target, termsafe.Line(c.After))
	default:
		before := c.Before
		if before == "" {
			before = "(unset)"
		}
		fmt.Fprintf(b, "  ~ %-10s %s: %s → %s\n", module, target, termsafe.Line(before), termsafe.Line(c.After))
	}
}

func writeRecap(b *strings.Builder, r *Report) {
	width := 4
	for _, h := range r.Hosts {
		width = max(width, len(termsafe.Line(h.Name)))
	}
	fmt.Fprintf(b, "RECAP %s\n", r.Mode)
	for _, h := range r.Hosts {
		fmt.Fprintf(b, "%-*s  %-11s changes=%d\n", width, termsafe.Line(h.Name), h.Status, len(h.Changes))
	}
	s := r.Summary
	fmt.Fprintf(b, "%s: %d in policy, %d drift, %d changed, %d ok, %d failed, %d unreachable",
		plural(s.Hosts, "host"), s.InPolicy, s.Drift, s.Changed, s.OK, s.Failed, s.Unreachable)
	if s.Skipped > 0 {
		fmt.Fprintf(b, ", %d skipped", s.Skipped)
	}
	b.WriteString("\n")
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// indent prefixes every line and joins them.
func indent(lines []string, prefix string) string {
	return prefix + strings.Join(lines, "\n"+prefix)
}
