package report

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/pgtune/pgtune/internal/mask"
	"github.com/pgtune/pgtune/internal/termsafe"
)

// WriteJSON writes the report as one JSON document. encoding/json escapes
// C0 controls; termsafe.JSON escapes what it leaves raw (C1 and bidi
// controls), so the document is safe to print as it is. Hosts are encoded
// one at a time: a fleet's document (every host's files before and after)
// is never held whole, only the report it is written from. The bytes are
// those of json.Encoder with a two-space indent.
func WriteJSON(w io.Writer, r *Report) error {
	bw := bufio.NewWriter(w)
	put := func(prefix string, v any) error {
		data, err := json.MarshalIndent(v, prefix, "  ")
		if err != nil {
			return err
		}
		_, err = bw.Write(termsafe.JSON(data))
		return err
	}
	bw.WriteString("{\n")
	if r.RunID != "" {
		bw.WriteString(`  "run_id": `)
		if err := put("  ", r.RunID); err != nil {
			return err
		}
		bw.WriteString(",\n")
	}
	if len(r.RunIDs) > 0 {
		bw.WriteString(`  "run_ids": `)
		if err := put("  ", r.RunIDs); err != nil {
			return err
		}
		bw.WriteString(",\n")
	}
	bw.WriteString(`  "hosts": `)
	if len(r.Hosts) == 0 {
		bw.WriteString("[]") // never null, even for a nil list
	} else {
		sep := "[\n    "
		for _, h := range r.Hosts {
			bw.WriteString(sep)
			sep = ",\n    "
			if err := put("    ", maskHost(h)); err != nil {
				return err
			}
		}
		bw.WriteString("\n  ]")
	}
	bw.WriteString(",\n  \"summary\": ")
	if err := put("  ", r.Summary); err != nil {
		return err
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}

// TextOptions say how the text report looks.
type TextOptions struct {
	Color  bool // SGR colours (only for a terminal; the caller decides)
	NoDiff bool // changed files by name and line counts, without their diff
}

// WriteText writes the report for a person: per host each change with
// its symbol (+ create, ~ update, - delete, ↻ restart), before → after
// and file diffs, notes and errors; hosts whose plan is the same as an
// earlier host's say so instead of repeating it; then the recap. Every
// text that came from a host (targets, values, diffs, notes, errors) is
// escaped with termsafe, so none of it can move the cursor or rewrite a
// line already printed.
func WriteText(w io.Writer, r *Report) error {
	return WriteTextWith(w, r, TextOptions{})
}

// WriteTextWith is WriteText with options.
func WriteTextWith(w io.Writer, r *Report, opts TextOptions) error {
	p := NewPrinter(w, r.Mode, opts)
	for _, h := range r.Hosts {
		if err := p.Host(h); err != nil {
			return err
		}
	}
	return p.Recap(r)
}

// Printer writes hosts one at a time, as their results come, and the
// recap at the end. It remembers the plans it has shown so that a host
// with the same plan as an earlier one gets one line. Not safe for
// concurrent use.
type Printer struct {
	w     io.Writer
	mode  Mode
	opts  TextOptions
	st    style
	first map[[sha256.Size]byte]string // plan signature → first host shown with it
	above map[string]bool              // hosts whose failure a plan above showed (Above)
}

// NewPrinter returns a Printer for a report of mode.
func NewPrinter(w io.Writer, mode Mode, opts TextOptions) *Printer {
	return &Printer{w: w, mode: mode, opts: opts, st: Style{On: opts.Color}, first: map[[sha256.Size]byte]string{}, above: map[string]bool{}}
}

// Above tells p that the block of host name's plan, printed above, showed
// it failed: its result (failed or not reached) then gets one line that
// points there, not its error again (a host's error is printed once).
func (p *Printer) Above(name string) {
	p.above[name] = true
}

// Host writes one host's block.
func (p *Printer) Host(h Host) error {
	h = maskHost(h)
	var b strings.Builder
	name := termsafe.Line(h.Name)
	sig := signature(h)
	if prev, ok := p.first[sig]; ok && len(h.Changes) > 0 {
		fmt.Fprintf(&b, "%s: %s, same plan as %s\n\n", p.st.Bold(name), p.headline(h), termsafe.Line(prev))
		_, err := io.WriteString(p.w, b.String())
		return err
	}
	if p.above[h.Name] && (h.Status == Failed || h.Status == Unreachable) && len(h.Changes) == 0 {
		fmt.Fprintf(&b, "%s: %s, see its plan above\n\n", p.st.Bold(name), p.headline(h))
		_, err := io.WriteString(p.w, b.String())
		return err
	}
	if len(h.Changes) > 0 {
		p.first[sig] = h.Name
	}
	fmt.Fprintf(&b, "%s: %s\n", p.st.Bold(name), p.headline(h))
	for _, c := range h.Changes {
		p.writeChange(&b, h, c)
	}
	for _, n := range h.Notes {
		fmt.Fprintf(&b, "  %s %s\n", p.st.Dim("note:"), strings.Join(termsafe.Lines(n), "\n        "))
	}
	switch {
	case h.Error != nil && h.NotReached:
		// The headline says not reached; the error says why.
		why := strings.TrimPrefix(hostless(h.Name, *h.Error), "not reached: ")
		fmt.Fprintf(&b, "  %s %s\n", p.st.Dim("why:"), strings.Join(termsafe.Lines(why), "\n    "))
	case h.Error != nil:
		fmt.Fprintf(&b, "  %s %s\n", p.st.Red("error:"), strings.Join(termsafe.Lines(hostless(h.Name, *h.Error)), "\n    "))
	}
	b.WriteString("\n")
	_, err := io.WriteString(p.w, b.String())
	return err
}

// hostless drops the "NAME: " the engine puts before a host's error: the
// block already names the host, the step stays ("connect: …",
// "MODULE: verify: …"). The JSON keeps the full message.
func hostless(name, msg string) string {
	if rest, ok := strings.CutPrefix(msg, name+": "); ok {
		return rest
	}
	return msg
}

// maskHost masks the secrets in a host's notes and error by their
// structure, whoever built it (FromPlan masks changes): the writers are
// the last place before output.
func maskHost(h Host) Host {
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
	return h
}

// maskNotes returns r with every host masked (maskHost); r itself is left
// alone.
func maskNotes(r *Report) *Report {
	out := *r
	out.Hosts = make([]Host, len(r.Hosts))
	for i, h := range r.Hosts {
		out.Hosts[i] = maskHost(h)
	}
	return &out
}

func (p *Printer) headline(h Host) string {
	n := len(h.Changes)
	restarts := ""
	if k := countRestarts(h); k > 0 {
		restarts = fmt.Sprintf(" (%s)", plural(k, "restart"))
	}
	switch h.Status {
	case InPolicy:
		return p.st.Green("in policy")
	case OK:
		return p.st.Green("ok, nothing to change (verified)")
	case Drift:
		return p.st.Yellow("drift") + fmt.Sprintf(", %s to make%s", plural(n, "change"), restarts)
	case Changed:
		return p.st.Yellow("changed") + fmt.Sprintf(", %s made and verified%s", plural(n, "change"), restarts)
	case Unreachable:
		return p.st.Red("UNREACHABLE")
	case Skipped:
		return "skipped, left untouched"
	case Failed:
		if h.NotReached {
			return p.st.Yellow("not reached")
		}
		if p.mode == ModeCheck && n > 0 {
			return p.st.Red("FAILED") + fmt.Sprintf(" (with %s planned before the failure)", plural(n, "change"))
		}
		return p.st.Red("FAILED")
	}
	return string(h.Status)
}

func countRestarts(h Host) int {
	n := 0
	for _, c := range h.Changes {
		if c.Action == "restart" {
			n++
		}
	}
	return n
}

// symbol is a change's mark, coloured by what it does.
func (p *Printer) symbol(action string) string {
	switch action {
	case "create":
		return p.st.Green("+")
	case "delete":
		return p.st.Red("-")
	case "restart":
		return p.st.Cyan("↻")
	}
	return p.st.Yellow("~")
}

func (p *Printer) writeChange(b *strings.Builder, h Host, c Change) {
	sym, module, target := p.symbol(c.Action), termsafe.Line(c.Module), termsafe.Line(c.Target)
	switch {
	case c.Kind == "file" && c.Diff != "":
		fmt.Fprintf(b, "  %s %-10s %s%s\n", sym, module, target, p.st.Dim(fileSummary(c)))
		if p.opts.NoDiff {
			return
		}
		// Line by line: a diff keeps its layout, and nothing inside a
		// line (a tab, a carriage return) can reach the terminal raw.
		lines := termsafe.Lines(strings.TrimRight(normalizeHeaders(c.Diff, c.Target), "\n"))
		for _, l := range lines {
			b.WriteString("      " + p.diffLine(l) + "\n")
		}
	case c.Kind == "file":
		fmt.Fprintf(b, "  %s %-10s %s (%s)\n", sym, module, target, termsafe.Line(c.After))
	default:
		before := c.Before
		if before == "" {
			before = "(unset)"
		}
		fmt.Fprintf(b, "  %s %-10s %s: %s → %s\n", sym, module, target,
			termsafe.Line(humanize(c.Target, before, h.HugePageSize)), termsafe.Line(humanize(c.Target, c.After, h.HugePageSize)))
	}
}

// fileSummary says what happens to a file in words: " (new file, 7 lines)".
func fileSummary(c Change) string {
	added, removed := 0, 0
	for i, l := range strings.Split(c.Diff, "\n") {
		switch {
		case i < 2 && (strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "+++ ")):
		case strings.HasPrefix(l, "+"):
			added++
		case strings.HasPrefix(l, "-"):
			removed++
		}
	}
	switch c.Action {
	case "create":
		return fmt.Sprintf(" (new file, %s)", plural(added, "line"))
	case "delete":
		return fmt.Sprintf(" (deleted, %s)", plural(removed, "line"))
	}
	return fmt.Sprintf(" (+%d -%d)", added, removed)
}

func (p *Printer) diffLine(l string) string {
	switch {
	case strings.HasPrefix(l, "+++ ") || strings.HasPrefix(l, "--- "):
		return p.st.Bold(l)
	case strings.HasPrefix(l, "@@"):
		return p.st.Cyan(l)
	case strings.HasPrefix(l, "+"):
		return p.st.Green(l)
	case strings.HasPrefix(l, "-"):
		return p.st.Red(l)
	}
	return l
}

// normalizeHeaders gives every diff one header form, git's: "--- a/PATH",
// "+++ b/PATH", /dev/null for a side that does not exist. Modules write
// either bare paths or a/ b/ prefixes; only headers naming the target are
// rewritten.
func normalizeHeaders(diff, target string) string {
	lines := strings.SplitN(diff, "\n", 3)
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "--- ") || !strings.HasPrefix(lines[1], "+++ ") {
		return diff
	}
	rel := strings.TrimPrefix(target, "/")
	fix := func(line, marker, prefix string) string {
		path := strings.TrimPrefix(line, marker)
		switch path {
		case "/dev/null":
			return line
		case target, prefix + rel, prefix + target:
			return marker + prefix + rel
		}
		return line
	}
	lines[0] = fix(lines[0], "--- ", "a/")
	lines[1] = fix(lines[1], "+++ ", "b/")
	return strings.Join(lines, "\n")
}

// Recap writes the recap: one line per host in the style of Ansible's
// PLAY RECAP, the groups of hosts sharing one plan, and a sentence that
// says what will happen (check) or happened (apply).
func (p *Printer) Recap(r *Report) error {
	var b strings.Builder
	width := 4
	for _, h := range r.Hosts {
		width = max(width, len(termsafe.Line(h.Name)))
	}
	fmt.Fprintf(&b, "RECAP %s\n", r.Mode)
	for _, h := range r.Hosts {
		status := string(h.Status)
		if h.Status == Failed && h.NotReached {
			status = "not_reached"
		}
		fmt.Fprintf(&b, "%-*s  %-11s changes=%d\n", width, termsafe.Line(h.Name), status, len(h.Changes))
	}
	for _, g := range samePlanGroups(r) {
		fmt.Fprintf(&b, "same plan on %d hosts: %s\n", len(g), termsafe.Line(nameRange(g)))
	}
	for _, n := range sharedNotes(r) {
		fmt.Fprintf(&b, "%s on %d hosts (%s): %s\n", p.st.Dim("note"), len(n.hosts), termsafe.Line(nameRange(n.hosts)),
			strings.Join(termsafe.Lines(n.text), "\n    "))
	}
	b.WriteString(summaryLine(r) + "\n")
	_, err := io.WriteString(p.w, b.String())
	return err
}

// sharedNote is a note that two or more hosts got, with those hosts.
type sharedNote struct {
	text  string
	hosts []string
}

// sharedNotes groups the warnings of a fleet: each note given to two or
// more hosts once, with the hosts, in the order first seen (their blocks
// said it host by host, or once for a group of the same plan).
func sharedNotes(r *Report) []sharedNote {
	index := map[string]int{}
	var notes []sharedNote
	for _, h := range r.Hosts {
		seen := map[string]bool{}
		for _, n := range maskHost(h).Notes {
			if seen[n] {
				continue
			}
			seen[n] = true
			i, ok := index[n]
			if !ok {
				i = len(notes)
				index[n] = i
				notes = append(notes, sharedNote{text: n})
			}
			notes[i].hosts = append(notes[i].hosts, h.Name)
		}
	}
	out := notes[:0]
	for _, n := range notes {
		if len(n.hosts) > 1 {
			out = append(out, n)
		}
	}
	return out
}

// signature identifies a host's plan: its status, changes and notes, as a
// digest. A fleet's hosts each have their own files: the text of every
// distinct plan (whole files before and after) is not kept for the run.
func signature(h Host) [sha256.Size]byte {
	d := sha256.New()
	io.WriteString(d, string(h.Status))
	for _, c := range h.Changes {
		for _, f := range []string{c.Module, c.Target, c.Before, c.After, c.Action, c.Diff} {
			io.WriteString(d, "\x00")
			io.WriteString(d, f) // whole files: not copied into a formatted string first
		}
	}
	for _, n := range h.Notes {
		io.WriteString(d, "\x01"+n)
	}
	fmt.Fprintf(d, "\x02%d", h.HugePageSize)
	var sum [sha256.Size]byte
	d.Sum(sum[:0])
	return sum
}

// samePlanGroups are the groups of two or more hosts with changes and the
// same plan, in report order.
func samePlanGroups(r *Report) [][]string {
	index := map[[sha256.Size]byte]int{}
	var groups [][]string
	for _, h := range r.Hosts {
		if len(h.Changes) == 0 {
			continue
		}
		sig := signature(maskHost(h))
		i, ok := index[sig]
		if !ok {
			i = len(groups)
			index[sig] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], h.Name)
	}
	out := groups[:0]
	for _, g := range groups {
		if len(g) > 1 {
			out = append(out, g)
		}
	}
	return out
}

// nameRange shortens a list of host names: "db01…db48" when they are one
// numbered run, else the names (the first ten, then how many more).
func nameRange(names []string) string {
	if len(names) > 2 && consecutive(names) {
		return names[0] + "…" + names[len(names)-1]
	}
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + fmt.Sprintf(" and %d more", len(names)-10)
	}
	return strings.Join(names, ", ")
}

// consecutive reports whether names are PREFIX+n, PREFIX+n+1, … with the
// same prefix and digit count.
func consecutive(names []string) bool {
	split := func(s string) (string, string) {
		i := len(s)
		for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
			i--
		}
		return s[:i], s[i:]
	}
	prefix, digits := split(names[0])
	if digits == "" {
		return false
	}
	var prev int
	for i, n := range names {
		p, d := split(n)
		if p != prefix || len(d) != len(digits) {
			return false
		}
		var v int
		fmt.Sscan(d, &v)
		if i > 0 && v != prev+1 {
			return false
		}
		prev = v
	}
	return true
}

// summaryLine says in one sentence what the run found or did:
// "3 hosts: 2 to change (2 restarts), 1 in policy".
func summaryLine(r *Report) string {
	s := r.Summary
	restarts := 0
	for _, h := range r.Hosts {
		if h.Status == Drift || h.Status == Changed {
			restarts += countRestarts(h)
		}
	}
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	withRestarts := func(what string) string {
		if restarts > 0 {
			return fmt.Sprintf("%s (%s)", what, plural(restarts, "restart"))
		}
		return what
	}
	add(s.Drift, withRestarts("to change"))
	add(s.Changed, withRestarts("changed and verified"))
	add(s.InPolicy, "in policy")
	add(s.OK, "ok")
	// The summary counts a host not reached as failed (JSON has no status
	// for it); the sentence tells them apart.
	notReached := 0
	for _, h := range r.Hosts {
		if h.Status == Failed && h.NotReached {
			notReached++
		}
	}
	add(s.Failed-notReached, "failed")
	add(s.Unreachable, "unreachable")
	add(notReached, "not reached")
	add(s.Skipped, "skipped")
	if len(parts) == 0 {
		return plural(s.Hosts, "host")
	}
	return plural(s.Hosts, "host") + ": " + strings.Join(parts, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
