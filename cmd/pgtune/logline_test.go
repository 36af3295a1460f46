package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/pgtune/pgtune/internal/mask"
	"github.com/pgtune/pgtune/internal/termsafe"
)

// logOnce logs one warning through the CLI's handler chain (masking and
// escaping, then the line handler) at a fixed time.
func logOnce(w io.Writer, level slog.Level, st style) {
	h := termsafe.Handler(newLineHandler(w, level, st), mask.Text)
	r := slog.NewRecord(time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC), slog.LevelWarn, "restarting \x1b[2Jdb1", 0)
	r.AddAttrs(slog.String("dir", "/srv/a b"), slog.Int("n", 3), slog.String("empty", ""),
		slog.Any("err", errors.New("exit 1: \x1b]0;owned\x07")))
	_ = h.Handle(nil, r) //nolint:staticcheck // the handlers ignore the context
}

// TestLineHandler: the line shape, colour only when asked, host text
// escaped once (the escapes are not escaped again), the level honoured.
func TestLineHandler(t *testing.T) {
	const plain = `15:04:05 WARN restarting \x1b[2Jdb1 dir="/srv/a b" n=3 empty="" err="exit 1: \x1b]0;owned\a"` + "\n"
	for _, tc := range []struct {
		name  string
		level slog.Level
		st    style
		want  string
	}{
		{"no colour", slog.LevelInfo, style{}, plain},
		{"colour", slog.LevelInfo, style{On: true}, "\x1b[2m15:04:05\x1b[0m \x1b[33mWARN\x1b[0m restarting \\x1b[2Jdb1 " +
			"\x1b[2mdir\x1b[0m\x1b[2m=\x1b[0m\"/srv/a b\" \x1b[2mn\x1b[0m\x1b[2m=\x1b[0m3 \x1b[2mempty\x1b[0m\x1b[2m=\x1b[0m\"\" " +
			"\x1b[2merr\x1b[0m\x1b[2m=\x1b[0m\"exit 1: \\x1b]0;owned\\a\"\n"},
		{"below the level", slog.LevelError, style{On: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			logOnce(&b, tc.level, tc.st)
			if b.String() != tc.want {
				t.Errorf("got  %q\nwant %q", b.String(), tc.want)
			}
			if got := sgrColour.ReplaceAllString(b.String(), ""); tc.want != "" && got != plain {
				t.Errorf("without its colours the line is %q, want %q", got, plain)
			}
		})
	}
}
