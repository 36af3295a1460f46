package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
)

// restarter plans a restart on every host and records, while applying,
// which hosts are "down" at once.
type restarter struct {
	fail     map[string]bool
	inPolicy map[string]bool // hosts it plans nothing for
	mu       sync.Mutex
	down     map[string]bool
	order    []string
	overlap  []string // "a+b": two members of one cluster down together
	cluster  map[string]string
}

func (r *restarter) Name() string       { return "restarter" }
func (r *restarter) Requires() []string { return nil }
func (r *restarter) NewParams() any     { return &struct{}{} }
func (r *restarter) Validate(any) error { return nil }
func (r *restarter) Check(_ context.Context, t *Target, _ any) (*plan.ModulePlan, error) {
	p := &plan.ModulePlan{Module: "restarter"}
	if t != nil && r.inPolicy[t.Name] {
		return p, nil
	}
	p.Add(plan.Change{Kind: plan.KindRestart, Target: "restart postgresql", Before: "a", After: "b"})
	return p, nil
}
func (r *restarter) Apply(_ context.Context, t *Target, _ *plan.ModulePlan) error {
	r.mu.Lock()
	for h := range r.down {
		if r.cluster[h] != "" && r.cluster[h] == r.cluster[t.Name] {
			r.overlap = append(r.overlap, h+"+"+t.Name)
		}
	}
	r.down[t.Name] = true
	r.order = append(r.order, t.Name)
	r.mu.Unlock()
	time.Sleep(20 * time.Millisecond) // the restart: others may run meanwhile
	r.mu.Lock()
	delete(r.down, t.Name)
	r.mu.Unlock()
	if r.fail[t.Name] {
		return errors.New("server refused to start")
	}
	return nil
}
func (r *restarter) Verify(context.Context, *Target, *plan.ModulePlan) error { return nil }

// clusterSession is a planned session over the local machine whose hosts
// carry the given replication facts (no Postgres: the wait for streaming
// has nothing to ask and passes).
func clusterSession(t *testing.T, m *restarter, topos map[string]*facts.Topology, vars map[string]map[string]any) *Session {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the host lock's state directory must be root-owned")
	}
	r := &Runner{Forks: 8, RunID: "test-run", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s := &Session{runner: r}
	names := []string{"p", "s1", "s2", "lone", "q", "q1"}
	m.cluster = map[string]string{}
	m.down = map[string]bool{}
	for _, n := range names {
		topo, ok := topos[n]
		if !ok {
			continue
		}
		if topo != nil {
			m.cluster[n] = topo.SystemID
		}
		v := map[string]any{StateDirVar: filepath.Join(t.TempDir(), "state")}
		for k, x := range vars[n] {
			v[k] = x
		}
		// Every host on this machine, reached at one address: the
		// primary's WAL senders to unix-socket clients are its standbys'.
		hr := &hostRun{host: &inventory.Host{Name: n, Vars: v, Conn: inventory.Conn{Address: "127.0.0.1"}}, tr: transport.NewLocal(),
			facts: &facts.Facts{Topology: topo}}
		p, _ := m.Check(context.Background(), nil, nil)
		hr.steps = []*step{{module: m, plan: p}}
		s.hosts = append(s.hosts, hr)
	}
	s.placeInClusters()
	return s
}

func replicated() map[string]*facts.Topology {
	two := []facts.StandbyInfo{{Name: "s1", Addr: "local", State: "streaming"}, {Name: "s2", Addr: "local", State: "streaming"}}
	return map[string]*facts.Topology{
		"p":    {Role: "primary", SystemID: "1", Standbys: two},
		"s1":   {Role: "standby", SystemID: "1", Receiver: "streaming"},
		"s2":   {Role: "standby", SystemID: "1", Receiver: "streaming"},
		"lone": {Role: "primary", SystemID: "3"},
		"q":    {Role: "primary", SystemID: "2", Standbys: two[:1]},
		"q1":   {Role: "standby", SystemID: "2", Receiver: "streaming"},
	}
}

func errOf(hr *hostRun) string {
	if hr.err == nil {
		return ""
	}
	return hr.err.Error()
}

func TestApplyInClusterOrder(t *testing.T) {
	m := &restarter{}
	s := clusterSession(t, m, replicated(), nil)
	s.Apply(context.Background())
	for _, hr := range s.hosts {
		if hr.err != nil {
			t.Errorf("%s: %v", hr.host.Name, hr.err)
		}
	}
	if len(m.overlap) > 0 {
		t.Errorf("members of one cluster down together: %v", m.overlap)
	}
	pos := map[string]int{}
	for i, h := range m.order {
		pos[h] = i
	}
	if len(pos) != 6 || !(pos["s1"] < pos["s2"] && pos["s2"] < pos["p"]) || !(pos["q1"] < pos["q"]) {
		t.Errorf("apply order %v: want s1 before s2 before p, q1 before q", m.order)
	}
	if notes := strings.Join(s.hosts[0].notes, "\n"); !strings.Contains(notes, "replication cluster 1: primary p, standbys s1, s2") {
		t.Errorf("p's notes: %q", notes)
	}
}

func TestApplyInClusterOrderStopsACluster(t *testing.T) {
	m := &restarter{fail: map[string]bool{"s1": true}}
	s := clusterSession(t, m, replicated(), nil)
	s.Apply(context.Background())
	for _, hr := range s.hosts {
		e := errOf(hr)
		switch hr.host.Name {
		case "s1":
			if !strings.Contains(e, "server refused to start") {
				t.Errorf("s1: %q", e)
			}
		case "s2", "p":
			if !strings.Contains(e, "not touched: s1 of the same cluster failed") {
				t.Errorf("%s: %q, want not touched because of s1", hr.host.Name, e)
			}
		default:
			if e != "" {
				t.Errorf("%s (another cluster) failed: %s", hr.host.Name, e)
			}
		}
	}
	for _, h := range m.order {
		if h == "s2" || h == "p" {
			t.Errorf("%s applied after its cluster's standby failed (order %v)", h, m.order)
		}
	}
}

func TestApplyRefusesPrimaryOfPartialCluster(t *testing.T) {
	topos := replicated()
	delete(topos, "s2") // left out by --limit: p still streams to it
	for _, accept := range []bool{false, true} {
		m := &restarter{}
		var vars map[string]map[string]any
		if accept {
			vars = map[string]map[string]any{"p": {PartialClusterVar: true}}
		}
		s := clusterSession(t, m, topos, vars)
		notes := strings.Join(s.hosts[0].notes, "\n")
		if got := strings.Contains(notes, "apply will refuse to restart this primary"); got == accept {
			t.Errorf("accept=%t: p's notes %q", accept, notes)
		}
		s.Apply(context.Background())
		e := errOf(s.hosts[0])
		if accept && e != "" {
			t.Errorf("accepted: p failed: %s", e)
		}
		if !accept && !strings.Contains(e, "refusing to restart the primary of cluster 1") {
			t.Errorf("p: %q, want a refusal", e)
		}
		applied := strings.Join(m.order, ",")
		if slices.Contains(m.order, "p") != accept {
			t.Errorf("accept=%t: applied %s", accept, applied)
		}
		if !strings.Contains(applied, "s1") {
			t.Errorf("accept=%t: s1 not applied: %s", accept, applied)
		}
	}
}

func TestApplyInClusterOrderTellsEveryRefusal(t *testing.T) {
	m := &restarter{}
	s := clusterSession(t, m, replicated(), nil)
	for _, hr := range s.hosts {
		if hr.host.Name == "s1" || hr.host.Name == "p" {
			hr.steps[0].plan.Refuse = errors.New("managed by Patroni")
		}
	}
	s.Apply(context.Background())
	for _, hr := range s.hosts {
		e := errOf(hr)
		switch hr.host.Name {
		case "s1", "p":
			if !strings.Contains(e, "managed by Patroni") {
				t.Errorf("%s: %q, want its own refusal", hr.host.Name, e)
			}
		case "s2":
			if !strings.Contains(e, "not touched") {
				t.Errorf("s2: %q", e)
			}
		}
	}
	if len(m.order) != 3 { // lone, q1, q
		t.Errorf("applied %v", m.order)
	}
}

// TestApplyInClusterOrderMemberDown: a standby that is down (its server
// not running: known by pg_control's system identifier alone) stops its
// cluster before any member is touched; other clusters go on.
func TestApplyInClusterOrderMemberDown(t *testing.T) {
	topos := replicated()
	topos["p"].Standbys = topos["p"].Standbys[:1] // s2 streams no more
	topos["s2"] = &facts.Topology{Role: facts.RoleStopped, SystemID: "1"}
	m := &restarter{}
	s := clusterSession(t, m, topos, nil)
	s.Apply(context.Background())
	for _, hr := range s.hosts {
		e := errOf(hr)
		switch hr.host.Name {
		case "s2":
			if !strings.Contains(e, "s2: PostgreSQL is not running: the rollout of its cluster (cluster 1: primary p, standbys s1, s2) stops before any member is touched") {
				t.Errorf("s2: %q", e)
			}
		case "s1", "p":
			if !strings.Contains(e, "not touched: s2 of the same cluster is down (PostgreSQL not running") {
				t.Errorf("%s: %q, want not touched because s2 is down", hr.host.Name, e)
			}
		default:
			if e != "" {
				t.Errorf("%s (another cluster) failed: %s", hr.host.Name, e)
			}
		}
	}
	for _, h := range m.order {
		if h == "s1" || h == "s2" || h == "p" {
			t.Errorf("%s applied while a member of its cluster is down (order %v)", h, m.order)
		}
	}
}

// TestPartialAcceptedAnsibleBooleans: the var is read as Ansible reads a
// boolean: "yes" from an INI inventory or YAML 1.1 habits lifts the
// refusal (strconv.ParseBool took it for false, silently), and anything
// that is not a boolean does not.
func TestPartialAcceptedAnsibleBooleans(t *testing.T) {
	for v, want := range map[any]bool{true: true, "yes": true, "On": true, "1": true, 1: true, "true": true,
		false: false, "no": false, "off": false, "0": false, "enabled": false, "": false} {
		hr := &hostRun{host: &inventory.Host{Name: "p", Vars: map[string]any{PartialClusterVar: v}}}
		if got := partialAccepted(hr); got != want {
			t.Errorf("%s: %#v: accepted %v, want %v", PartialClusterVar, v, got, want)
		}
	}
	if partialAccepted(&hostRun{host: &inventory.Host{Name: "p"}}) {
		t.Error("accepted without the var")
	}
}
