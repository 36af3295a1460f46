package termsafe

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler wraps a slog.Handler so that the message, every key and every
// string-like attribute value (strings, errors, Stringers, anything
// printed with %v) reach it rewritten by mask (when not nil) and then
// escaped with Line. Numbers, bools, times and durations pass as they are.
// Log lines carry host text (paths, errors, command output) to stderr,
// which is usually the operator's terminal.
func Handler(h slog.Handler, mask func(string) string) slog.Handler {
	return handler{inner: h, mask: mask}
}

type handler struct {
	inner slog.Handler
	mask  func(string) string
}

func (h handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	nr := slog.NewRecord(r.Time, r.Level, h.clean(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		nr.AddAttrs(h.attr(a))
		return true
	})
	return h.inner.Handle(ctx, nr)
}

func (h handler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.attr(a)
	}
	return handler{h.inner.WithAttrs(out), h.mask}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{h.inner.WithGroup(h.clean(name)), h.mask}
}

func (h handler) clean(s string) string {
	if h.mask != nil {
		s = h.mask(s)
	}
	return Line(s)
}

func (h handler) attr(a slog.Attr) slog.Attr {
	key := h.clean(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, ga := range g {
			out[i] = h.attr(ga)
		}
		return slog.Group(key, out...)
	case slog.KindString:
		return slog.String(key, h.clean(v.String()))
	case slog.KindAny:
		// Errors, Stringers and structs are rendered by the inner handler
		// with %v or their own methods: render them here, once, as text.
		return slog.String(key, h.clean(fmt.Sprint(v.Any())))
	}
	return slog.Attr{Key: key, Value: v}
}
