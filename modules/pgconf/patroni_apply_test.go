package pgconf

import (
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
)

// ctl.insecure is honoured only with a finding that says so.
func TestInsecureNote(t *testing.T) {
	for _, tc := range []struct {
		tls  *facts.PatroniTLS
		want string
	}{
		{nil, ""},
		{&facts.PatroniTLS{CAFile: "/ca.pem"}, ""},
		{&facts.PatroniTLS{Insecure: true}, "/etc/patroni.yml sets ctl.insecure: true: pgtune calls this member's REST API (https://db1:8008) without checking its certificate"},
	} {
		got := insecureNote(&facts.Patroni{ConfigFile: "/etc/patroni.yml", APIURL: "https://db1:8008", TLS: tc.tls})
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("TLS %+v: note %q, want %q", tc.tls, got, tc.want)
		}
	}
}

func TestSwitchoverCandidate(t *testing.T) {
	tests := []struct {
		name, cluster, want, err string
	}{
		{name: "least lag among replicas on the new values",
			cluster: `{"members": [
				{"name": "a", "role": "leader", "state": "running", "lag": 0},
				{"name": "b", "role": "replica", "state": "running", "lag": 4096},
				{"name": "c", "role": "sync_standby", "state": "streaming", "lag": 0},
				{"name": "d", "role": "replica", "state": "running", "lag": 0, "pending_restart": true}]}`,
			want: "c"},
		{name: "nofailover and unknown lag passed over",
			cluster: `{"members": [
				{"name": "a", "role": "leader", "state": "running"},
				{"name": "b", "role": "replica", "state": "running", "lag": 0, "tags": {"nofailover": true}},
				{"name": "c", "role": "replica", "state": "running", "lag": "unknown"},
				{"name": "d", "role": "replica", "state": "running", "lag": 10}]}`,
			want: "d"},
		{name: "none fit: says why for each",
			cluster: `{"members": [
				{"name": "a", "role": "leader", "state": "running"},
				{"name": "b", "role": "replica", "state": "starting", "lag": 0},
				{"name": "c", "role": "replica", "state": "running", "lag": 0, "pending_restart": true}]}`,
			err: "no replica to switch over to (b (state starting), c (restart pending: not on the new values))"},
		{name: "synchronous mode: the synchronous standby, though lagging more",
			cluster: `{"members": [
				{"name": "a", "role": "leader", "state": "running"},
				{"name": "b", "role": "replica", "state": "streaming", "lag": 0},
				{"name": "c", "role": "sync_standby", "state": "streaming", "lag": 100}]}`,
			want: "c"},
		{name: "synchronous mode: the synchronous standby not on the new values",
			cluster: `{"members": [
				{"name": "a", "role": "leader", "state": "running"},
				{"name": "b", "role": "replica", "state": "streaming", "lag": 0},
				{"name": "c", "role": "sync_standby", "state": "streaming", "lag": 0, "pending_restart": true}]}`,
			err: "no replica to switch over to (b (not a synchronous standby), c (restart pending: not on the new values))"},
		{name: "not JSON", cluster: `<html>`, err: "not Patroni's JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := switchoverCandidate([]byte(tt.cluster), "a")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// The pages the running server frees count toward the pool check only
// when they are of the target page size.
func TestFreedInTargetSize(t *testing.T) {
	const mb2, gb1 = 2 << 20, 1 << 30
	for _, tc := range []struct {
		ours          int64
		live          string
		target, deflt int64
		want          int64
	}{
		{100, "0", mb2, mb2, 100},     // default on both sides
		{100, "", mb2, mb2, 100},      // empty is the default
		{100, "2048", mb2, mb2, 100},  // explicit 2 MB (kB setting)
		{100, "2MB", mb2, mb2, 100},   // with a unit
		{100, "0", gb1, mb2, 0},       // runs on 2 MB, target 1 GB
		{100, "1048576", mb2, mb2, 0}, // runs on 1 GB, target 2 MB
		{100, "1GB", gb1, mb2, 100},   // 1 GB on both sides
		{100, "0", gb1, gb1, 100},     // the kernel's default is 1 GB
		{100, "junk", mb2, mb2, 0},    // unreadable: none
		{100, "0", mb2, 0, 0},         // kernel default unknown
	} {
		if got := freedInTargetSize(tc.ours, tc.live, tc.target, tc.deflt); got != tc.want {
			t.Errorf("freedInTargetSize(%d, %q, %d, %d) = %d, want %d", tc.ours, tc.live, tc.target, tc.deflt, got, tc.want)
		}
	}
	if got := hugePageBytes("0", mb2); got != mb2 {
		t.Errorf("hugePageBytes(0) = %d", got)
	}
}

// Check refuses a switchover no member could ever take: no other member,
// or every other one tagged nofailover; state and pending restarts are
// not held against them (the rollout restarts them first).
func TestSwitchoverImpossible(t *testing.T) {
	for _, tc := range []struct{ cluster, want string }{
		{`{"members": [{"name": "a", "role": "leader"}, {"name": "b", "role": "replica", "state": "stopped", "pending_restart": true}]}`, ""},
		{`{"members": [{"name": "a", "role": "leader"}, {"name": "b", "tags": {"nofailover": true}}, {"name": "c"}]}`, ""},
		{`{"members": [{"name": "a", "role": "leader"}]}`, "no other member"},
		{`{"members": [{"name": "a", "role": "leader"}, {"name": "b", "tags": {"nofailover": true}}, {"name": "c", "tags": {"nofailover": true}}]}`,
			"every other member is tagged nofailover (b, c)"},
	} {
		if got := switchoverImpossible([]byte(tc.cluster), "a"); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.cluster, got, tc.want)
		}
	}
}

// A put-back gives Patroni's postgresql.conf back only when it differs
// in the managed lines alone.
func TestUnmanagedLines(t *testing.T) {
	before := "# Do not edit this file manually!\ninclude 'postgresql.base.conf'\nhuge_pages = 'off'\nmax_connections = '20'\nshared_buffers = '16MB'\n"
	newer := "# Do not edit this file manually!\ninclude 'postgresql.base.conf'\nhuge_page_size = '0'\nhuge_pages = 'on'\nmax_connections = '20'\nshared_buffers = '30720kB'\n"
	other := strings.Replace(newer, "max_connections = '20'", "max_connections = '30'", 1)
	if unmanagedLines([]byte(before)) != unmanagedLines([]byte(newer)) {
		t.Error("files differing in the managed lines only are told apart")
	}
	if unmanagedLines([]byte(before)) == unmanagedLines([]byte(other)) {
		t.Error("a change to another parameter is not seen")
	}
}
