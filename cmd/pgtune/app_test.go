package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
)

func TestConfirm(t *testing.T) {
	tests := []struct {
		name     string
		yes      bool
		terminal bool
		answer   string
		wantErr  string
	}{
		{name: "--yes skips the question", yes: true},
		{name: "no terminal refuses", wantErr: "stdin is not a terminal; pass --yes"},
		{name: "terminal, y", terminal: true, answer: "y\n"},
		{name: "terminal, YES", terminal: true, answer: "YES\n"},
		{name: "terminal, n", terminal: true, answer: "n\n", wantErr: "not confirmed; nothing was changed"},
		{name: "terminal, empty", terminal: true, answer: "\n", wantErr: "not confirmed"},
		{name: "terminal, closed", terminal: true, answer: "", wantErr: "not confirmed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			a := &App{Stdin: strings.NewReader(tt.answer), Stderr: &stderr, IsTerminal: func() bool { return tt.terminal }}
			err := a.confirm(&options{yes: tt.yes}, "Apply?")
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if tt.terminal && !tt.yes && !strings.Contains(stderr.String(), "Apply? [y/N]") {
				t.Errorf("question not asked on stderr: %q", stderr.String())
			}
		})
	}
}

func TestParseIntersperse(t *testing.T) {
	a := &App{Stderr: &bytes.Buffer{}}
	o, err := a.parse("check", []string{"play.yml", "-i", "inv.yml", "--limit", "db*", "--format", "json"}, 1, targetFlags)
	if err != nil {
		t.Fatal(err)
	}
	if o.playbook != "play.yml" || o.inventory != "inv.yml" || o.limit != "db*" || o.format != "json" || o.forks != 20 {
		t.Fatalf("parsed %+v", o)
	}
}

// TestNewRunIDOrder: runs started in one second get ids that sort as they
// started (a host's journals are ordered by id: an apply and the rollback
// right after it must not swap, or rollback goes back to the wrong run),
// in the documented form.
func TestNewRunIDOrder(t *testing.T) {
	a := newApp()
	base := time.Date(2026, 12, 3, 10, 42, 44, 0, time.UTC)
	earlier := "" // the greatest id of the millisecond before
	for ms := 0; ms < 1000; ms += 7 {
		at := base.Add(time.Duration(ms)*time.Millisecond + 999*time.Microsecond)
		a.Now = func() time.Time { return at }
		greatest := ""
		for range 5 {
			id := a.newRunID()
			if !engine.ValidRunID(id) || !strings.HasPrefix(id, "20261203T104244Z-") {
				t.Fatalf("run id %q (at %s) is not in the documented form", id, at)
			}
			if id <= earlier {
				t.Fatalf("run id %q (at %s) sorts before %q, made a millisecond before", id, at, earlier)
			}
			greatest = max(greatest, id)
		}
		earlier = greatest
	}
}
