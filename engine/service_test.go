package engine

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
)

// TestUndoServiceOrder: a drop-in written, systemd reloaded, the unit
// restarted. Undo puts the drop-in back first, then reloads and restarts
// in the order they first ran, so systemd and the unit take up the
// restored file.
func TestUndoServiceOrder(t *testing.T) {
	ctx := context.Background()
	h := newFakeHost()
	tg := fakeTarget(h, "r1")
	const dropin = "/etc/systemd/system/postgresql@.service.d/pgtune.conf"
	mark := tg.Mark()
	for i, step := range []func() error{
		func() error {
			return tg.WriteFile(ctx, dropin, []byte("[Service]\nOOMScoreAdjust=-900\n"), transport.WriteOptions{})
		},
		func() error { return tg.Service(ctx, "", "daemon-reload") },
		func() error { return tg.Service(ctx, "postgresql@15-main.service", "restart") },
	} {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
	}
	from := len(h.Log)
	if err := tg.UndoSince(ctx, mark); err != nil {
		t.Fatal(err)
	}
	want := []string{"remove " + dropin, "service daemon-reload", "service restart postgresql@15-main.service"}
	if got := changes(h, from); !reflect.DeepEqual(got, want) {
		t.Errorf("undo ran %q, want %q", got, want)
	}
}

// TestUndoServiceAloneRunsNothing: with nothing else to put back, there
// is nothing for systemd to take up again.
func TestUndoServiceAloneRunsNothing(t *testing.T) {
	ctx := context.Background()
	h := newFakeHost()
	tg := fakeTarget(h, "r1")
	mark := tg.Mark()
	if err := tg.Service(ctx, "", "daemon-reload"); err != nil {
		t.Fatal(err)
	}
	from := len(h.Log)
	if err := tg.UndoSince(ctx, mark); err != nil {
		t.Fatal(err)
	}
	if got := changes(h, from); len(got) != 0 {
		t.Errorf("undo ran %q", got)
	}
}

func TestServiceRefusesBadInput(t *testing.T) {
	for _, tc := range []struct{ unit, action, want string }{
		{"", "stop", `service action "stop" is not one pgtune runs`},
		{"postgresql.service", "enable", `service action "enable" is not one pgtune runs`},
		{"--root=/tmp", "restart", `"--root=/tmp" is not a systemd unit name`},
		{"../x.service", "restart", `"../x.service" is not a systemd unit name`},
		{"postgresql", "restart", `"postgresql" is not a systemd unit name`},
		{"", "restart", `"" is not a systemd unit name`},
		{"x.service", "daemon-reload", "daemon-reload names no unit"},
	} {
		h := newFakeHost()
		tg := fakeTarget(h, "r1")
		err := tg.Service(context.Background(), tc.unit, tc.action)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s %s: err = %v, want %s", tc.action, tc.unit, err, tc.want)
		}
		if len(h.Log) != 0 || len(tg.Journal.Entries) != 0 {
			t.Errorf("%s %s: refused, yet ran %q and recorded %+v", tc.action, tc.unit, h.Log, tg.Journal.Entries)
		}
	}
}

// TestServiceRealSystemctl runs systemctl daemon-reload on this machine
// through the local transport. Where systemd is PID 1 it must succeed;
// elsewhere (a container, this CI box) systemctl refuses, and the error
// must name the action. Either way the action was journaled first.
func TestServiceRealSystemctl(t *testing.T) {
	if testing.Short() {
		t.Skip("runs systemctl daemon-reload on this machine")
	}
	if _, err := os.Stat("/usr/bin/systemctl"); err != nil {
		if _, err := os.Stat("/bin/systemctl"); err != nil {
			t.Skip("no systemctl installed")
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("daemon-reload needs root")
	}
	comm, _ := os.ReadFile("/proc/1/comm")
	systemd := strings.TrimSpace(string(comm)) == "systemd"
	tr := transport.NewLocal()
	state := t.TempDir()
	tg := &Target{Name: "localhost", Transport: tr, Journal: NewJournal("service-test", "localhost", state, tr, false), Module: "oom"}
	err := tg.Service(context.Background(), "", "daemon-reload")
	var exit *transport.ExitError
	switch {
	case systemd && err != nil:
		t.Fatalf("systemd is PID 1, daemon-reload failed: %v", err)
	case !systemd && (err == nil || !errors.As(err, &exit) || !strings.HasPrefix(err.Error(), "systemctl daemon-reload: ")):
		t.Fatalf("without systemd as PID 1: err = %v, want systemctl's refusal", err)
	}
	want := []JournalEntry{{Kind: "service", Module: "oom", Action: "daemon-reload"}}
	if !reflect.DeepEqual(tg.Journal.Entries, want) {
		t.Errorf("journal %+v", tg.Journal.Entries)
	}
	if b, err := os.ReadFile(tg.Journal.Dir() + "/journal.json"); err != nil || !strings.Contains(string(b), `"action": "daemon-reload"`) {
		t.Errorf("saved journal: %s %v", b, err)
	}
}
