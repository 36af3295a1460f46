package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteJSON writes the report as one JSON document.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for a person: per host each change with
// before → after and file diffs, notes and errors, then a recap line per
// host in the style of Ansible's PLAY RECAP.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	for _, h := range r.Hosts {
		fmt.Fprintf(&b, "%s: %s\n", h.Name, headline(r.Mode, h))
		for _, c := range h.Changes {
			writeChange(&b, c)
		}
		for _, n := range h.Notes {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
		if h.Error != nil {
			fmt.Fprintf(&b, "  error: %s\n", strings.ReplaceAll(*h.Error, "\n", "\n    "))
		}
		b.WriteString("\n")
	}
	writeRecap(&b, r)
	_, err := io.WriteString(w, b.String())
	return err
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
	case Failed:
		if mode == "check" && n > 0 {
			return fmt.Sprintf("FAILED (with %s planned before the failure)", plural(n, "change"))
		}
		return "FAILED"
	}
	return string(h.Status)
}

func writeChange(b *strings.Builder, c Change) {
	switch {
	case c.Kind == "file" && c.Diff != "":
		fmt.Fprintf(b, "  ~ %-10s %s\n", c.Module, c.Target)
		b.WriteString(indent(strings.TrimRight(c.Diff, "\n"), "      "))
		b.WriteString("\n")
	case c.Kind == "file":
		fmt.Fprintf(b, "  ~ %-10s %s (%s)\n", c.Module, c.Target, c.After)
	default:
		before := c.Before
		if before == "" {
			before = "(unset)"
		}
		fmt.Fprintf(b, "  ~ %-10s %s: %s → %s\n", c.Module, c.Target, before, c.After)
	}
}

func writeRecap(b *strings.Builder, r *Report) {
	width := 4
	for _, h := range r.Hosts {
		width = max(width, len(h.Name))
	}
	fmt.Fprintf(b, "RECAP %s\n", r.Mode)
	for _, h := range r.Hosts {
		fmt.Fprintf(b, "%-*s  %-11s changes=%d\n", width, h.Name, h.Status, len(h.Changes))
	}
	s := r.Summary
	fmt.Fprintf(b, "%s: %d in policy, %d drift, %d changed, %d ok, %d failed, %d unreachable\n",
		plural(s.Hosts, "host"), s.InPolicy, s.Drift, s.Changed, s.OK, s.Failed, s.Unreachable)
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}
