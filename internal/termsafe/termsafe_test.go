package termsafe

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestLineAndText(t *testing.T) {
	tests := []struct {
		name, in, line, text string
	}{
		{"plain", "/var/lib/postgresql/15/main", "/var/lib/postgresql/15/main", "/var/lib/postgresql/15/main"},
		{"unicode kept", "données → ok", "données → ok", "données → ok"},
		{"backslash kept", `cp %p /a\b`, `cp %p /a\b`, `cp %p /a\b`},
		{"erase line and return", "/d\x1b[2K\rdb1: in policy", `/d\x1b[2K\rdb1: in policy`, `/d\x1b[2K\rdb1: in policy`},
		{"osc title", "\x1b]0;owned\x07", `\x1b]0;owned\a`, `\x1b]0;owned\a`},
		{"newline and tab", "a\tb\nc", `a\tb\nc`, "a\tb\nc"},
		{"crlf", "a\r\nb", `a\r\nb`, "a\\r\nb"},
		{"DEL and C1 CSI", "x\x7fy\u009bz", `x\x7fy\u009bz`, `x\x7fy\u009bz`},
		{"bidi override", "evil\u202etxt.exe", `evil\u202etxt.exe`, `evil\u202etxt.exe`},
		{"bidi isolates", "\u2066a\u2069 \u200f", `\u2066a\u2069 \u200f`, `\u2066a\u2069 \u200f`},
		{"zero width and bom", "a\u200bb\ufeff", `a\u200bb\ufeff`, `a\u200bb\ufeff`},
		{"line separator", "a\u2028b", `a\u2028b`, `a\u2028b`},
		{"invalid utf8", "a\xffb\xc3", `a\xffb\xc3`, `a\xffb\xc3`},
		{"nul", "a\x00b", `a\x00b`, `a\x00b`},
		{"empty", "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Line(tc.in); got != tc.line {
				t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.line)
			}
			if got := Text(tc.in); got != tc.text {
				t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.text)
			}
			for _, out := range []string{Line(tc.in), Text(tc.in)} {
				assertInert(t, out, true)
			}
			assertInert(t, Line(tc.in), false)
		})
	}
}

// assertInert fails when s holds anything a terminal would act on.
func assertInert(t *testing.T, s string, layoutAllowed bool) {
	t.Helper()
	for _, r := range s {
		if (r == '\n' || r == '\t') && layoutAllowed {
			continue
		}
		if needsEscape(r) || r == 0xfffd {
			t.Errorf("%q still holds %U", s, r)
		}
	}
}

func TestLines(t *testing.T) {
	got := Lines("+a\x1b[31m\n-b\r\n c\t# x")
	want := []string{`+a\x1b[31m`, `-b\r`, " c\t# x"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Lines = %q, want %q", got, want)
	}
}

func TestCleanStringsAreNotCopied(t *testing.T) {
	s := strings.Repeat("shared_buffers = 128MB\n", 100)
	if n := testing.AllocsPerRun(10, func() { _ = Text(s) }); n != 0 {
		t.Errorf("Text allocates %v times on clean input", n)
	}
}

type stringer struct{}

func (stringer) String() string { return "pid \x1b[2J 42" }

func TestHandlerEscapesAndMasks(t *testing.T) {
	var buf bytes.Buffer
	mask := func(s string) string { return strings.ReplaceAll(s, "hunter2", "(sensitive)") }
	log := slog.New(Handler(slog.NewTextHandler(&buf, nil), mask)).With("dir", "/d\x1b[2K\r")
	log.WithGroup("g\x1b").Error("restart \x1b]0;x\a failed hunter2",
		"err", errors.New("exit 1: \u202eoops hunter2"),
		"who", stringer{}, "n", 3, slog.Group("sub", "path", "/x\ry"))
	out := buf.String()
	if strings.ContainsAny(out, "\x1b\r\a\u202e") || strings.Contains(out, "hunter2") {
		t.Errorf("log line holds raw control characters or the secret: %q", out)
	}
	for _, want := range []string{`x1b[2K`, `restart \\x1b]0;x\\a failed (sensitive)`, `u202eoops (sensitive)`, "n=3", `pid \\x1b[2J 42`, `path=/x\ry`} {
		if !strings.Contains(out, want) {
			t.Errorf("log line lacks %q: %s", want, out)
		}
	}
}

func TestJSON(t *testing.T) {
	in := map[string]string{"path": "/d\x1b[2K\r\u009b\u202e\U000e0041x\u00e9", "plain": "ok"}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := JSON(raw)
	for _, r := range string(out) {
		if r < 0x20 || needsEscape(r) {
			t.Errorf("JSON output holds %U: %s", r, out)
		}
	}
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil || back["path"] != in["path"] || back["plain"] != "ok" {
		t.Errorf("JSON changed the document: %v %q", err, back)
	}
	if !strings.Contains(string(out), `\u202e`) || !strings.Contains(string(out), `\udb40\udc41`) || !strings.Contains(string(out), "é") {
		t.Errorf("JSON = %s", out)
	}
	clean := []byte(`{"a":"é"}`)
	if got := JSON(clean); &got[0] != &clean[0] {
		t.Error("a clean document is copied")
	}
}
