package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pgtune/pgtune/engine/report"
)

// lineHandler writes one log line per record: "15:04:05 WARN msg k=v".
// It never reads from the terminal: colour is decided once, from the
// flags and the environment (style), so no background or cursor query
// can stall a run on a terminal that does not answer (charmbracelet/log
// asked through termenv and waited up to 10 s).
type lineHandler struct {
	mu    *sync.Mutex
	w     io.Writer
	level slog.Leveler
	style style
	attrs string // pre-rendered " k=v" of With
	group string
}

func newLineHandler(w io.Writer, level slog.Leveler, st style) *lineHandler {
	return &lineHandler{mu: &sync.Mutex{}, w: w, level: level, style: st}
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	if !r.Time.IsZero() {
		b.WriteString(h.style.Dim(r.Time.Format(time.TimeOnly)))
		b.WriteByte(' ')
	}
	b.WriteString(h.levelText(r.Level))
	b.WriteByte(' ')
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		h.writeAttr(&b, h.group, a)
		return true
	})
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) levelText(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return h.style.Red("ERRO")
	case l >= slog.LevelWarn:
		return h.style.Yellow("WARN")
	case l >= slog.LevelInfo:
		return h.style.Cyan("INFO")
	}
	return h.style.Dim("DEBU")
}

func (h *lineHandler) writeAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	key := a.Key
	if group != "" {
		key = group + "." + key
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			h.writeAttr(b, key, g)
		}
		return
	}
	// Values reach here escaped (termsafe.Handler): quoting only groups
	// words, it must not escape the escapes again.
	v := a.Value.String()
	if v == "" || strings.ContainsAny(v, " =") {
		v = `"` + v + `"`
	}
	b.WriteByte(' ')
	b.WriteString(h.style.Dim(key + "="))
	b.WriteString(v)
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := *h
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		h.writeAttr(&b, h.group, a)
	}
	out.attrs = b.String()
	return &out
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	out := *h
	if out.group != "" {
		name = out.group + "." + name
	}
	out.group = name
	return &out
}

// style is report.Style: one colouring for logs and reports.
type style = report.Style
