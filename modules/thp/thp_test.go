package thp

import (
	"context"
	"fmt"
	"path"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/modules/internal/fakehost"
	"github.com/pgtune/pgtune/modules/internal/moduletest"
)

const (
	madviseEnabled = "always [madvise] never\n"
	madviseDefrag  = "always defer defer+madvise [madvise] never\n"
	neverEnabled   = "always madvise [never]\n"
	neverDefrag    = "always defer defer+madvise madvise [never]\n"
)

// newHost is a fake host whose kernel has THP in madvise mode.
func newHost() *fakehost.Host {
	h := fakehost.New()
	h.Files[EnabledPath] = madviseEnabled
	h.Files[DefragPath] = madviseDefrag
	return h
}

// gatherOutput is what factsScript prints on the fake host.
func gatherOutput(h *fakehost.Host) string {
	var b strings.Builder
	for _, n := range []string{"enabled", "defrag"} {
		if c, ok := h.Files[Dir+"/"+n]; ok {
			fmt.Fprintf(&b, "v %s %s\n", n, strings.TrimSuffix(c, "\n"))
			if !h.ReadOnly && !h.NotRoot {
				fmt.Fprintf(&b, "w %s\n", n)
			}
		}
	}
	for _, dir := range TmpfilesDirs {
		var names []string
		for p := range h.Files {
			if path.Dir(p) == dir && strings.HasSuffix(p, ".conf") {
				names = append(names, p)
			}
		}
		sort.Strings(names)
		for _, p := range names {
			fmt.Fprintf(&b, "f %s\n", p)
			for i, l := range strings.Split(strings.TrimSuffix(h.Files[p], "\n"), "\n") {
				if strings.Contains(l, Dir+"/") {
					fmt.Fprintf(&b, "l %d:%s\n", i+1, l)
				}
			}
		}
	}
	if c, ok := h.Files[DefaultFile]; ok {
		b.WriteString("own\n")
		for i, l := range strings.Split(strings.TrimSuffix(c, "\n"), "\n") {
			fmt.Fprintf(&b, "o %d:%s\n", i+1, l)
		}
	}
	return b.String()
}

// target is the host as the runner shows it to the module after a gather.
func target(t *testing.T, h *fakehost.Host) *engine.Target {
	t.Helper()
	tg := h.Target("db1")
	f, err := parseFacts([]byte(gatherOutput(h)))
	if err != nil {
		t.Fatal(err)
	}
	tg.Facts.Modules = map[string]any{Name: f}
	return tg
}

func params(t *testing.T, enabled, defrag string) *Params {
	t.Helper()
	prm := DefaultParams()
	var err error
	if prm.Enabled, err = expr.Parse(enabled, "policy.yml", 3, 16); err != nil {
		t.Fatal(err)
	}
	if prm.Defrag, err = expr.Parse(defrag, "policy.yml", 4, 15); err != nil {
		t.Fatal(err)
	}
	return prm
}

func TestCheckApplyVerify(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name            string
		enabled, defrag string // policy
		setup           func(h *fakehost.Host)
		want            []string // moduletest.Changes
		notes           []string // substrings
		after           [2]string
	}{
		{name: "madvise host, default policy", enabled: Never, defrag: Never,
			want:  []string{EnabledPath + " madvise→never", DefragPath + " madvise→never", "file " + DefaultFile},
			after: [2]string{neverEnabled, neverDefrag}},
		{name: "madvise policy keeps the live modes", enabled: Madvise, defrag: Madvise,
			want:  []string{"file " + DefaultFile},
			after: [2]string{madviseEnabled, madviseDefrag}},
		{name: "enabled never, defrag madvise", enabled: Never, defrag: Madvise,
			want:  []string{EnabledPath + " madvise→never", "file " + DefaultFile},
			after: [2]string{neverEnabled, madviseDefrag}},
		{name: "in policy", enabled: Never, defrag: Never,
			setup: func(h *fakehost.Host) {
				h.Files[EnabledPath], h.Files[DefragPath] = neverEnabled, neverDefrag
				h.Files[DefaultFile] = render(settings{enabled: Never, defrag: Never})
			},
			after: [2]string{neverEnabled, neverDefrag}},
		{name: "boot file with other modes is rewritten", enabled: Never, defrag: Never,
			setup: func(h *fakehost.Host) {
				h.Files[DefaultFile] = render(settings{enabled: Madvise, defrag: Madvise})
			},
			want:  []string{EnabledPath + " madvise→never", DefragPath + " madvise→never", "file " + DefaultFile},
			after: [2]string{neverEnabled, neverDefrag}},
		{name: "an earlier file with the same mode", enabled: Never, defrag: Never,
			setup: func(h *fakehost.Host) {
				h.Files["/usr/lib/tmpfiles.d/00-thp.conf"] = "# vendor\nw " + EnabledPath + " - - - - never\n"
			},
			want:  []string{EnabledPath + " madvise→never", DefragPath + " madvise→never", "file " + DefaultFile},
			notes: []string{"/usr/lib/tmpfiles.d/00-thp.conf:2 also sets " + EnabledPath + " to never at boot"},
			after: [2]string{neverEnabled, neverDefrag}},
		{name: "a later file is ignored at boot", enabled: Never, defrag: Never,
			setup: func(h *fakehost.Host) {
				h.Files["/etc/tmpfiles.d/zz-thp.conf"] = "w+ " + DefragPath + " - - - - always\n"
			},
			want:  []string{EnabledPath + " madvise→never", DefragPath + " madvise→never", "file " + DefaultFile},
			notes: []string{"/etc/tmpfiles.d/zz-thp.conf:1 also writes " + DefragPath + " at boot: systemd-tmpfiles ignores it"},
			after: [2]string{neverEnabled, neverDefrag}},
		{name: "a masked earlier file does not count", enabled: Never, defrag: Never,
			setup: func(h *fakehost.Host) {
				h.Files["/usr/lib/tmpfiles.d/00-thp.conf"] = "w " + EnabledPath + " - - - - always\n"
				h.Files["/etc/tmpfiles.d/00-thp.conf"] = "# masks the vendor's file\n"
			},
			want:  []string{EnabledPath + " madvise→never", DefragPath + " madvise→never", "file " + DefaultFile},
			after: [2]string{neverEnabled, neverDefrag}},
		{name: "kernel without transparent huge pages", enabled: Never, defrag: Never,
			setup: func(h *fakehost.Host) {
				delete(h.Files, EnabledPath)
				delete(h.Files, DefragPath)
			},
			notes: []string{"the kernel has no transparent huge pages"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost()
			if tc.setup != nil {
				tc.setup(h)
			}
			m := New()
			prm := params(t, tc.enabled, tc.defrag)
			p, err := m.Check(ctx, target(t, h), prm)
			if err != nil {
				t.Fatal(err)
			}
			if got := moduletest.Changes(p); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("changes %q\nwant    %q", got, tc.want)
			}
			for _, n := range tc.notes {
				if !strings.Contains(strings.Join(p.Notes, "\n"), n) {
					t.Errorf("notes %q lack %q", p.Notes, n)
				}
			}
			if len(h.Log) != 0 {
				t.Fatalf("check ran commands: %q", h.Log)
			}
			tg := target(t, h)
			if err := m.Apply(ctx, tg, p); err != nil {
				t.Fatal(err)
			}
			if err := m.Verify(ctx, tg, p); err != nil {
				t.Fatal(err)
			}
			if tc.after != [2]string{} {
				if got := [2]string{h.Files[EnabledPath], h.Files[DefragPath]}; got != tc.after {
					t.Errorf("kernel after apply %q, want %q", got, tc.after)
				}
				if got, want := h.Files[DefaultFile], render(settings{enabled: tc.enabled, defrag: tc.defrag}); got != want {
					t.Errorf("%s:\n%s\nwant\n%s", DefaultFile, got, want)
				}
			}
			again, err := m.Check(ctx, target(t, h), prm)
			if err != nil {
				t.Fatal(err)
			}
			if again.HasChanges() {
				t.Errorf("not in policy after apply: %q", moduletest.Changes(again))
			}
		})
	}
}

func TestBootFileContent(t *testing.T) {
	want := "# Written by pgtune (thp module): transparent huge pages at boot.\n" +
		"w /sys/kernel/mm/transparent_hugepage/enabled - - - - never\n" +
		"w /sys/kernel/mm/transparent_hugepage/defrag - - - - madvise\n"
	if got := render(settings{enabled: Never, defrag: Madvise}); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestCheckRefuses(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name            string
		enabled, defrag string
		file            string // tmpfiles_file, when not the default
		setup           func(h *fakehost.Host)
		want            string
	}{
		{name: "always from an expression", enabled: "${vars.mode}", defrag: Never,
			want: "policy.yml:3:16: enabled: always is refused"},
		{name: "an unknown mode", enabled: Never, defrag: "defer",
			want: `policy.yml:4:15: defrag must be never or madvise, got "defer"`},
		{name: "an earlier file sets another mode at boot", enabled: Never, defrag: Never,
			setup: func(h *fakehost.Host) {
				h.Files["/usr/lib/tmpfiles.d/00-thp.conf"] = "w " + DefragPath + " - - - - always\n"
			},
			want: `/usr/lib/tmpfiles.d/00-thp.conf:1 sets ` + DefragPath + ` to "always" at boot and systemd-tmpfiles applies it instead of ` + DefaultFile},
		{name: "a same-named file in /etc masks ours", enabled: Never, defrag: Never, file: "/run/tmpfiles.d/pgtune-thp.conf",
			setup: func(h *fakehost.Host) {
				h.Files["/etc/tmpfiles.d/pgtune-thp.conf"] = "# no entries\n"
			},
			want: `/etc/tmpfiles.d/pgtune-thp.conf masks /run/tmpfiles.d/pgtune-thp.conf: systemd-tmpfiles reads only the first of same-named files`},
		{name: "read-only /sys as root", enabled: Never, defrag: Never,
			setup: func(h *fakehost.Host) { h.ReadOnly = true },
			want:  Dir + " is read-only here (container?)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost()
			if tc.setup != nil {
				tc.setup(h)
			}
			tg := target(t, h)
			if err := tg.Scope.Set("vars", map[string]any{"mode": "always"}); err != nil {
				t.Fatal(err)
			}
			prm := params(t, tc.enabled, tc.defrag)
			if tc.file != "" {
				prm.TmpfilesFile = expr.MustParse(tc.file)
			}
			_, err := New().Check(ctx, tg, prm)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestNotRoot: check shows the changes with a note; apply refuses before
// changing anything.
func TestNotRoot(t *testing.T) {
	ctx := context.Background()
	h := newHost()
	h.NotRoot = true
	m := New()
	p, err := m.Check(ctx, target(t, h), DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasChanges() || !strings.Contains(strings.Join(p.Notes, "\n"), "not root on the host") {
		t.Fatalf("changes %q notes %q", moduletest.Changes(p), p.Notes)
	}
	err = m.Apply(ctx, target(t, h), p)
	if err == nil || !strings.Contains(err.Error(), "not root on the host") {
		t.Fatalf("apply: %v", err)
	}
	if len(h.Log) != 0 || h.Files[EnabledPath] != madviseEnabled {
		t.Fatalf("apply changed the host: %q", h.Log)
	}
}

func TestParseFacts(t *testing.T) {
	f, err := parseFacts([]byte("v enabled always [madvise] never\nw enabled\nv defrag always defer defer+madvise [madvise] never\nw defrag\n" +
		"f /usr/lib/tmpfiles.d/thp.conf\nl 2:w! " + EnabledPath + " - - - - never\nl 3:# w " + DefragPath + " - - - - always\n" +
		"own\no 1:# x\no 2:w " + EnabledPath + " - - - - never\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Facts{Enabled: Madvise, Defrag: Madvise, Writable: true,
		Boot:  []BootEntry{{File: "/usr/lib/tmpfiles.d/thp.conf", Line: 2, Path: EnabledPath, Value: Never}},
		Files: []string{"/usr/lib/tmpfiles.d/thp.conf"}, Own: "# x\nw " + EnabledPath + " - - - - never\n", OwnExists: true}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("got  %+v\nwant %+v", f, want)
	}
	if f, err := parseFacts(nil); err != nil || f.Enabled != "" || f.Writable {
		t.Errorf("no THP: %+v, %v", f, err)
	}
	for _, bad := range []string{
		"v enabled always madvise never",          // nothing in force
		"v enabled always [mad$vise] never",       // not a word
		"v enabled " + strings.Repeat("x ", 20),   // too many
		"v swappiness [1]",                        // not a setting
		"l 1:w " + EnabledPath + " - - - - never", // a line of no file
		"f relative/x.conf",
		"f /etc/tmpfiles.d/../x.conf",
		"f /etc/tmpfiles.d/x.conf\nl x:w",
		"o 2:skipped a line",
		"Z unknown tag",
	} {
		if _, err := parseFacts([]byte(bad)); err == nil {
			t.Errorf("parseFacts(%q): accepted", bad)
		}
	}
}

func TestManages(t *testing.T) {
	m := New()
	for _, tc := range []struct {
		kind, target string
		want         bool
	}{
		{"sysfs", EnabledPath, true},
		{"sysfs", DefragPath, true},
		{"sysfs", "/sys/kernel/mm/transparent_hugepage/khugepaged/defrag", false},
		{"sysfs", "/sys/kernel/mm/ksm/run", false},
		{"file", DefaultFile, true},
		{"file", "/tmp/x/tmpfiles.d/pgtune-thp.conf", true},
		{"file", "/etc/tmpfiles.d/.hidden.conf", false},
		{"file", "/etc/tmpfiles.d/x", false},
		{"file", "/etc/passwd", false},
		{"file", "/etc/tmpfiles.d/../passwd.conf", false},
		{"sysctl", "vm.nr_hugepages", false},
	} {
		if got := m.Manages(nil, tc.kind, tc.target); got != tc.want {
			t.Errorf("Manages(%s, %s) = %v, want %v", tc.kind, tc.target, got, tc.want)
		}
	}
}

// TestReadErrorNamesPathOnce: a boot file that cannot be read is named
// once in the error ("read X: …"), not twice ("read X: read X: …").
func TestReadErrorNamesPathOnce(t *testing.T) {
	const file = "/run/tmpfiles.d/pgtune-thp.conf"
	h := newHost()
	h.Fail = func(op transport.Op, args []string) string {
		if op == transport.OpReadFile && len(args) > 0 && args[0] == file {
			return "cat: " + file + ": Permission denied"
		}
		return ""
	}
	prm := params(t, Never, Never)
	prm.TmpfilesFile = expr.MustParse(file)
	_, err := New().Check(context.Background(), target(t, h), prm)
	if err == nil || !strings.HasPrefix(err.Error(), "read "+file+": ") || strings.Contains(err.Error(), "read "+file+": read ") {
		t.Errorf("err = %v, want it to start with read %s: once", err, file)
	}
}
