package main

import (
	"io"
	"log/slog"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/log"
	"github.com/muesli/termenv"
)

// newLineHandler is charmbracelet/log writing one line per record,
// "15:04:05 WARN msg k=v", coloured only when st says so.
//
// It can never query the terminal. termenv (under lipgloss, under log)
// asks a terminal for its colours only when the logger's writer is an
// *os.File on a terminal; the logger gets w behind noTTY, so it never
// sees one. The colour profile is set from st, not detected, and the
// styles hold plain ANSI colours, none adaptive to the background.
func newLineHandler(w io.Writer, level slog.Level, st style) slog.Handler {
	l := log.NewWithOptions(&noTTY{w}, log.Options{
		Level:           log.Level(level),
		ReportTimestamp: true,
		TimeFormat:      time.TimeOnly,
	})
	profile := termenv.Ascii
	if st.On {
		profile = termenv.ANSI
	}
	l.SetColorProfile(profile)
	l.SetStyles(lineStyles())
	return l
}

// noTTY hides the writer's type (an *os.File) from termenv, the one
// thing that would let it query the terminal. A pointer: log keys a
// renderer cache by writer, and a pointer is always hashable (a func
// writer is not) and gives each logger its own colour profile.
type noTTY struct{ w io.Writer }

func (n *noTTY) Write(p []byte) (int, error) { return n.w.Write(p) }

// lineStyles are the colours of report.Style: dim time and keys, levels
// in red, yellow, cyan, dim.
func lineStyles() *log.Styles {
	dim := lipgloss.NewStyle().Faint(true)
	level := func(name string, s lipgloss.Style) lipgloss.Style { return s.SetString(name) }
	colour := func(c string) lipgloss.Style { return lipgloss.NewStyle().Foreground(lipgloss.Color(c)) }
	st := log.DefaultStyles()
	st.Timestamp, st.Key, st.Separator = dim, dim, dim
	st.Levels = map[log.Level]lipgloss.Style{
		log.DebugLevel: level("DEBU", dim),
		log.InfoLevel:  level("INFO", colour("6")),
		log.WarnLevel:  level("WARN", colour("3")),
		log.ErrorLevel: level("ERRO", colour("1")),
		log.FatalLevel: level("FATA", colour("1")),
	}
	return st
}
