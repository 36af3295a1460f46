package main

import (
	"io"
	"os"

	"golang.org/x/term"

	"github.com/pgtune/pgtune/engine/report"
)

// colorFor says whether w gets colour: only a terminal, never with
// NO_COLOR (https://no-color.org: any non-empty value), --no-color or
// TERM=dumb. It looks at the file descriptor only; nothing is sent to
// the terminal to ask what it supports.
func colorFor(w io.Writer, noColor bool) style {
	if noColor || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return style{}
	}
	return style{On: isTerminal(w)}
}

// isTerminal reports whether w is a terminal's file descriptor.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// style is report.Style: one colouring for logs and reports.
type style = report.Style
