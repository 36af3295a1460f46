package testhost

import (
	"testing"
	"time"
)

func TestPatroni(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts etcd and three Patroni members")
	}
	start := time.Now()
	pc := Patroni(t, 3)
	t.Logf("formed in %v", time.Since(start))
	st, err := pc.ClusterState()
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]int{}
	for _, m := range st.Members {
		roles[m.Role]++
	}
	if roles["leader"] != 1 || roles["replica"] != 2 {
		t.Fatalf("roles = %v, want one leader and two replicas", roles)
	}
	sysid := ""
	for _, m := range pc.Members {
		if !m.PG.Ready() {
			t.Errorf("%s: postmaster not ready", m.Name)
		}
		id := m.PG.Query(t, "SELECT system_identifier FROM pg_control_system()")
		if sysid != "" && id != sysid {
			t.Errorf("%s: system identifier %s, others %s", m.Name, id, sysid)
		}
		sysid = id
	}
	if h := pc.History(t); len(h) != 0 {
		t.Errorf("fresh cluster has history %s", h)
	}
}
