package main

import (
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/rollout"
)

// TestProgressText: the progress line counts the whole run and names the
// batch being worked on when a rollout has more than one.
func TestProgressText(t *testing.T) {
	start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	tests := []struct {
		name                string
		verb                string
		done, failed, total int
		batch               rollout.Batch
		want                string
	}{
		{"check", "check", 3, 1, 10, rollout.Batch{}, "check: 3/10 done, 1 failed, 7 left · 1m5s"},
		{"one batch is not named", "apply", 0, 0, 4, rollout.Batch{Number: 1, Of: 1, Hosts: []string{"a", "b", "c", "d"}}, "apply: 0/4 done, 0 failed, 4 left · 1m5s"},
		{"canary", "apply", 0, 0, 40, rollout.Batch{Number: 1, Of: 3, Hosts: []string{"db01"}}, "apply: 0/40 done, 0 failed, 40 left · batch 1 of 3 (1 host) · 1m5s"},
		{"the rest", "apply", 5, 1, 40, rollout.Batch{Number: 3, Of: 3, Hosts: make([]string, 35)}, "apply: 5/40 done, 1 failed, 35 left · batch 3 of 3 (35 hosts) · 1m5s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lv := &live{verb: tt.verb, done: tt.done, failed: tt.failed, total: tt.total, batch: tt.batch,
				start: start, now: func() time.Time { return start.Add(65*time.Second + 300*time.Millisecond) }}
			if got := lv.progressText(); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestProgressLineNamesTheBatch: an apply in batches on a terminal shows
// the batch in its progress line. The fake host runs no commands, so the
// canary batch fails whole and the rollout stops there.
func TestProgressLineNamesTheBatch(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fakehost.facts")
	writeFile(t, fake, profiles[0].transcript())
	inv := filepath.Join(dir, "inv.yml")
	writeFile(t, inv, "all:\n  hosts:\n    db1:\n      connection: local\n    db2:\n      connection: local\n  vars:\n    sysctl_dir: "+dir+"/sysctl.d\n")
	book := namedDefaultPlaybook(t, dir)
	out := runOnSilentTerminal(t, []string{TestHostEnv + "=" + fake, "TERM=xterm", "NO_COLOR=1", "XDG_STATE_HOME=" + dir},
		"apply", "--yes", "--serial", "1", "-i", inv, book)
	line := regexp.MustCompile(`\r\x1b\[Kapply: 1/2 done, 1 failed, 1 left · batch 1 of 2 \(1 host\) · `)
	if !line.Match(out) {
		t.Errorf("no progress line naming the batch:\n%q", out)
	}
}
