package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/internal/mask"
	"github.com/pgtune/pgtune/internal/termsafe"
)

// SensitiveVar is the inventory var listing the names of vars whose values
// are secrets. Vars named by sensitiveWords (password, *_password,
// *_passwd, *_pass, *_secret, *_token, *_secret_key, ...) are secrets too
// (ansible_password, ansible_become_pass, ...), and
// so are the credentials inside pg_restart (PGPASSWORD=..., --password=...).
// A secret's value never reaches a report, a diff, a log line or the facts
// output: changes that contain it are marked Sensitive (masked by
// engine/report) and every other text has it replaced by report.Masked.
//
// Secrets that the inventory does not name — a password in
// primary_conninfo, in archive_command, in an error quoting a command —
// are masked by their structure (internal/mask): report.FromPlan masks
// changes, redact masks notes, errors, facts and log values.
const SensitiveVar = "pgtune_sensitive"

// sensitiveWords make a var sensitive as its whole name or its last
// part(s) after an underscore (password, db_passwd,
// aws_secret_access_key), never inside it: a value is masked wherever it
// appears, and password_hint: "no" would hide every "no".
var sensitiveWords = []string{"password", "pass", "passwd", "pwd", "passphrase", "secret", "token",
	"secret_key", "secret_access_key", "api_key", "apikey"}

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
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for name, v := range vars {
		if name == "pg_restart" {
			// A command run on the host: its credentials, not all of it.
			if cmd, ok := v.(string); ok {
				for _, s := range mask.Secrets(cmd) {
					add(s)
				}
			}
		}
		if !named[name] && !hasSensitiveSuffix(name) {
			continue
		}
		for _, s := range leaves(v) {
			add(s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) || len(out[i]) == len(out[j]) && out[i] < out[j] })
	return out
}

func hasSensitiveSuffix(name string) bool {
	n := strings.ToLower(name)
	for _, w := range sensitiveWords {
		if n == w || strings.HasSuffix(n, "_"+w) {
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

// redact replaces every inventory secret in s, then masks what the
// structure of s shows to be a secret (conninfo passwords, credentials in
// commands).
func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		s = strings.ReplaceAll(s, sec, report.Masked)
	}
	return mask.Text(s)
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
	if p == nil {
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

// redactFacts masks secrets anywhere in a host's facts (paths, errors,
// sysctl lines): every string in them goes through redact.
func redactFacts(f *facts.Facts, secrets []string) *facts.Facts {
	if f == nil {
		return f
	}
	b, err := json.Marshal(f)
	if err != nil {
		return f
	}
	// Numbers stay json.Number: exact, as the host reported them.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return f
	}
	changed := false
	doc = mapStrings(doc, func(s string) string {
		r := redact(s, secrets)
		changed = changed || r != s
		return r
	})
	if !changed {
		return f
	}
	if b, err = json.Marshal(doc); err != nil {
		return f
	}
	var out facts.Facts
	if json.Unmarshal(b, &out) != nil {
		return f
	}
	return &out
}

// mapStrings applies fn to every string (map keys included) of a decoded
// JSON value.
func mapStrings(v any, fn func(string) string) any {
	switch x := v.(type) {
	case string:
		return fn(x)
	case []any:
		for i, e := range x {
			x[i] = mapStrings(e, fn)
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fn(k)] = mapStrings(e, fn)
		}
		return out
	}
	return v
}

// redactLogger wraps a host's logger when it has secrets: the same
// handler the CLI uses (termsafe.Handler), with this host's inventory
// secrets masked before the structural masking, so loggers that other
// programs hand the engine are masked and escaped too.
func redactLogger(l *slog.Logger, secrets []string) *slog.Logger {
	if len(secrets) == 0 {
		return l
	}
	return slog.New(termsafe.Handler(l.Handler(), func(s string) string { return redact(s, secrets) }))
}
