package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/report"
)

// SensitiveVar is the inventory var listing the names of vars whose values
// are secrets. Vars named *_password, *_secret or *_token are secrets too.
// A secret's value never reaches a report, a diff, a log line or the facts
// output: changes that contain it are marked Sensitive (masked by
// engine/report) and every other text has it replaced by report.Masked.
const SensitiveVar = "pgtune_sensitive"

var sensitiveSuffixes = []string{"_password", "_secret", "_token"}

// secretsOf returns the values of a host's sensitive vars, longest first so
// that a secret containing another is masked whole.
func secretsOf(vars map[string]any) []string {
	named := map[string]bool{}
	switch l := vars[SensitiveVar].(type) {
	case []any:
		for _, n := range l {
			named[fmt.Sprint(n)] = true
		}
	case string:
		named[l] = true
	}
	seen := map[string]bool{}
	var out []string
	for name, v := range vars {
		if !named[name] && !hasSensitiveSuffix(name) {
			continue
		}
		for _, s := range leaves(v) {
			if s != "" && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) || len(out[i]) == len(out[j]) && out[i] < out[j] })
	return out
}

func hasSensitiveSuffix(name string) bool {
	for _, s := range sensitiveSuffixes {
		if strings.HasSuffix(strings.ToLower(name), s) {
			return true
		}
	}
	return false
}

// leaves flattens a var's value to the scalars it holds, as text.
func leaves(v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, leaves(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, e := range x {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []string{fmt.Sprint(v)}
}

// redact replaces every secret in s.
func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		s = strings.ReplaceAll(s, sec, report.Masked)
	}
	return s
}

func containsSecret(s string, secrets []string) bool {
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			return true
		}
	}
	return false
}

// markSensitive flags the changes of a module plan that hold a secret and
// masks secrets in the plan's notes.
func markSensitive(p *plan.ModulePlan, secrets []string) {
	if p == nil || len(secrets) == 0 {
		return
	}
	for i := range p.Changes {
		c := &p.Changes[i]
		if containsSecret(c.Before, secrets) || containsSecret(c.After, secrets) || containsSecret(c.Diff, secrets) || containsSecret(c.Target, secrets) {
			// The target itself stays as it is (modules act on it); the
			// report masks secrets in it.
			c.Sensitive = true
		}
	}
	for i, n := range p.Notes {
		p.Notes[i] = redact(n, secrets)
	}
}

// redactFacts masks secrets anywhere in a host's facts (paths, errors).
func redactFacts(f *facts.Facts, secrets []string) *facts.Facts {
	if f == nil || len(secrets) == 0 {
		return f
	}
	b, err := json.Marshal(f)
	if err != nil || !containsSecret(string(b), secrets) {
		return f
	}
	// Secrets are masked in the JSON text, so each is escaped as JSON
	// escapes it there.
	s := string(b)
	for _, sec := range secrets {
		q, _ := json.Marshal(sec)
		s = strings.ReplaceAll(s, strings.Trim(string(q), `"`), report.Masked)
	}
	var out facts.Facts
	if json.Unmarshal([]byte(s), &out) != nil {
		return f
	}
	return &out
}

// redactHandler masks secrets in log records before they are written.
type redactHandler struct {
	slog.Handler
	secrets []string
}

func (h redactHandler) Handle(ctx context.Context, r slog.Record) error {
	nr := slog.NewRecord(r.Time, r.Level, redact(r.Message, h.secrets), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		nr.AddAttrs(h.attr(a))
		return true
	})
	return h.Handler.Handle(ctx, nr)
}

func (h redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.attr(a)
	}
	return redactHandler{h.Handler.WithAttrs(out), h.secrets}
}

func (h redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{h.Handler.WithGroup(name), h.secrets}
}

func (h redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, ga := range g {
			out[i] = h.attr(ga)
		}
		return slog.Group(a.Key, out...)
	case slog.KindString, slog.KindAny:
		if s := v.String(); containsSecret(s, h.secrets) {
			return slog.String(a.Key, redact(s, h.secrets))
		}
	}
	return a
}

// redactLogger wraps a host's logger when it has secrets.
func redactLogger(l *slog.Logger, secrets []string) *slog.Logger {
	if len(secrets) == 0 {
		return l
	}
	return slog.New(redactHandler{l.Handler(), secrets})
}
