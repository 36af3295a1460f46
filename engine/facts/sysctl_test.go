package facts

import (
	"reflect"
	"testing"
)

func TestParseSysctlLine(t *testing.T) {
	tests := []struct {
		line         string
		key, value   string
		ignoreErrors bool
		ok           bool
	}{
		{"vm.nr_hugepages = 1024", "vm.nr_hugepages", "1024", false, true},
		{"vm.nr_hugepages=1024", "vm.nr_hugepages", "1024", false, true},
		{"  \tvm.nr_hugepages\t=\t1024  ", "vm.nr_hugepages", "1024", false, true},
		{"vm/nr_hugepages = 1024", "vm.nr_hugepages", "1024", false, true},
		{"-vm.overcommit_memory = 2", "vm.overcommit_memory", "2", true, true},
		{"- vm.overcommit_memory = 2", "vm.overcommit_memory", "2", true, true},
		{"net/ipv4/conf/eth0.100/forwarding = 1", "net.ipv4.conf.eth0/100.forwarding", "1", false, true},
		{"net.ipv4.conf.eth0/100.forwarding = 1", "net.ipv4.conf.eth0/100.forwarding", "1", false, true},
		{"net.ipv4.tcp_rmem = 4096 87380 6291456", "net.ipv4.tcp_rmem", "4096 87380 6291456", false, true},
		{"kernel.domainname = a=b", "kernel.domainname", "a=b", false, true},
		{"vm.nr_hugepages =", "vm.nr_hugepages", "", false, true},
		{"# vm.nr_hugepages = 1", "", "", false, false},
		{"   # vm.nr_hugepages = 1", "", "", false, false},
		{"; vm.nr_hugepages = 1", "", "", false, false},
		{"", "", "", false, false},
		{"   ", "", "", false, false},
		{"vm.nr_hugepages", "", "", false, false},
		{"= 5", "", "", false, false},
		{"-", "", "", false, false},
	}
	for _, tt := range tests {
		k, v, ign, ok := ParseSysctlLine(tt.line)
		if k != tt.key || v != tt.value || ign != tt.ignoreErrors || ok != tt.ok {
			t.Errorf("ParseSysctlLine(%q) = %q, %q, %v, %v; want %q, %q, %v, %v",
				tt.line, k, v, ign, ok, tt.key, tt.value, tt.ignoreErrors, tt.ok)
		}
	}
}

func TestOrderSysctlFiles(t *testing.T) {
	files := []SysctlFile{
		{Path: "/etc/sysctl.conf"},
		{Path: "/lib/sysctl.d/50-pid-max.conf"}, // /lib -> /usr/lib: masked
		{Path: "/usr/lib/sysctl.d/50-pid-max.conf"},
		{Path: "/usr/lib/sysctl.d/99-sysctl.conf"}, // masked by /etc
		{Path: "/etc/sysctl.d/99-sysctl.conf"},
		{Path: "/run/sysctl.d/99-sysctl.conf"},    // masked by /etc
		{Path: "/run/sysctl.d/10-hugepages.conf"}, // wins over /usr/local
		{Path: "/usr/local/lib/sysctl.d/10-hugepages.conf"},
		{Path: "/etc/sysctl.d/README.sysctl"}, // not *.conf
		{Path: "/tmp/elsewhere/00-x.conf"},    // not a known directory
		{Path: "/etc/sysctl.d/Z-upper.conf"},  // byte order: 'Z' < 'a' < 'z'
		{Path: "/usr/lib/sysctl.d/a-lower.conf"},
	}
	var got []string
	for _, f := range OrderSysctlFiles(files) {
		got = append(got, f.Path)
	}
	want := []string{
		"/run/sysctl.d/10-hugepages.conf",
		"/usr/lib/sysctl.d/50-pid-max.conf",
		"/etc/sysctl.d/99-sysctl.conf",
		"/etc/sysctl.d/Z-upper.conf",
		"/usr/lib/sysctl.d/a-lower.conf",
		"/etc/sysctl.conf",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order:\n got %q\nwant %q", got, want)
	}
}

func numaFacts(t *testing.T) *Facts {
	t.Helper()
	f, err := ParseGather(readTestdata(t, "gather-numa.txt"), testSets...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestSysctlWinnerAndAssignments(t *testing.T) {
	f := numaFacts(t)
	tests := []struct {
		key        string
		winner     string // file:line=value
		assigments int
	}{
		{"vm.nr_hugepages", "/etc/sysctl.conf:1=2048", 4},
		{"vm.overcommit_memory", "/etc/sysctl.d/99-sysctl.conf:2=1", 3},
		{"vm.overcommit_ratio", "/etc/sysctl.d/zz-db.conf:1=90", 2},
		{"vm.overcommit_kbytes", "/usr/lib/sysctl.d/05-first.conf:1=3", 1},
		{"kernel.pid_max", "", 0}, // not a managed key: not gathered
	}
	for _, tt := range tests {
		w, ok := f.SysctlWinner(tt.key)
		got := ""
		if ok {
			got = w.File + ":" + itoa(w.Line) + "=" + w.Value
		}
		if got != tt.winner {
			t.Errorf("SysctlWinner(%s) = %q, want %q", tt.key, got, tt.winner)
		}
		if n := len(f.SysctlAssignments(tt.key)); n != tt.assigments {
			t.Errorf("SysctlAssignments(%s): %d, want %d: %+v", tt.key, n, tt.assigments, f.SysctlAssignments(tt.key))
		}
	}
}

func TestSysctlOverrides(t *testing.T) {
	f := numaFacts(t)
	tests := []struct {
		name, key, own string
		later          []string
		maskedBy       string
	}{
		{"ours in /etc", "vm.nr_hugepages", "/etc/sysctl.d/10-hugepages.conf",
			[]string{"/etc/sysctl.d/99-sysctl.conf:3", "/etc/sysctl.conf:1"}, ""},
		{"ours outside the known dirs sits like /etc", "vm.nr_hugepages", "/tmp/t/10-hugepages.conf",
			[]string{"/etc/sysctl.d/99-sysctl.conf:3", "/etc/sysctl.conf:1"}, ""},
		{"ours masked by /etc", "vm.nr_hugepages", "/usr/lib/sysctl.d/10-hugepages.conf",
			[]string{"/etc/sysctl.d/10-hugepages.conf:2", "/etc/sysctl.d/99-sysctl.conf:3", "/etc/sysctl.conf:1"},
			"/etc/sysctl.d/10-hugepages.conf"},
		{"late name", "vm.overcommit_memory", "/etc/sysctl.d/99-overcommit.conf",
			[]string{"/etc/sysctl.d/99-sysctl.conf:2"}, ""},
		{"after everything but sysctl.conf", "vm.nr_hugepages", "/etc/sysctl.d/zzz.conf",
			[]string{"/etc/sysctl.conf:1"}, ""},
		{"sysctl.conf itself", "vm.nr_hugepages", "/etc/sysctl.conf", nil, ""},
		{"glob counts", "vm.overcommit_kbytes", "/etc/sysctl.d/00-x.conf",
			[]string{"/usr/lib/sysctl.d/05-first.conf:1"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			later, masked := f.SysctlOverrides(tt.key, tt.own)
			var got []string
			for _, s := range later {
				got = append(got, s.File+":"+itoa(s.Line))
			}
			if !reflect.DeepEqual(got, tt.later) || masked != tt.maskedBy {
				t.Errorf("got %q masked %q, want %q masked %q", got, masked, tt.later, tt.maskedBy)
			}
		})
	}
}

func TestCommentOutSysctlLines(t *testing.T) {
	in := "# keep\nvm.nr_hugepages = 7\nkernel.x = 1\nvm.overcommit_memory=1"
	got := string(CommentOutSysctlLines([]byte(in), []int{2, 4}, "pgtune"))
	want := "# keep\n# vm.nr_hugepages = 7  # pgtune\nkernel.x = 1\n# vm.overcommit_memory=1  # pgtune"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	for i, line := range []string{"# vm.nr_hugepages = 7  # pgtune", "# vm.overcommit_memory=1  # pgtune"} {
		if _, _, _, ok := ParseSysctlLine(line); ok {
			t.Errorf("line %d still parses as an assignment", i)
		}
	}
}
