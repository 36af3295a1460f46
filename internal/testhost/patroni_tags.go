package testhost

import (
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
)

// SetNofailover sets the member's nofailover tag in its patroni.yml, has
// its Patroni reload (POST /reload), and waits until GET /cluster (the
// DCS) and the member's own GET /patroni both show the tag as set: the
// member keeps running and streaming, but Patroni will not promote it
// (a switchover to it is refused).
func (pc *PatroniCluster) SetNofailover(t testing.TB, m *PatroniMember, on bool) {
	t.Helper()
	b, err := os.ReadFile(m.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	from, to := "  nofailover: true\n", "  nofailover: false\n"
	if on {
		from, to = to, from
	}
	conf := string(b)
	if !strings.Contains(conf, from) && !strings.Contains(conf, to) {
		t.Fatalf("testhost: %s has no nofailover tag line", m.ConfigFile)
	}
	WriteOwned(t, "postgres", m.ConfigFile, strings.Replace(conf, from, to, 1), 0o600)
	resp, err := pc.client.Post(m.APIURL()+"/reload", "application/json", nil)
	if err != nil {
		t.Fatalf("testhost: POST %s/reload: %v", m.APIURL(), err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("testhost: POST %s/reload: %s: %s", m.APIURL(), resp.Status, body)
	}
	var dirs []string
	for _, x := range pc.Members {
		dirs = append(dirs, x.Dir)
	}
	tagged := func(tags map[string]any) bool {
		v, _ := tags["nofailover"].(bool)
		return v == on
	}
	AwaitFiles(t, m.Name+"'s nofailover tag to be "+map[bool]string{true: "set", false: "cleared"}[on], dirs, nil, func() bool {
		b, err := pc.get(m.APIURL() + "/patroni")
		if err != nil && len(b) == 0 {
			return false
		}
		var self struct {
			Tags map[string]any `json:"tags"`
		}
		if json.Unmarshal(b, &self) != nil || !tagged(self.Tags) {
			return false
		}
		b, err = pc.get(m.APIURL() + "/cluster")
		if err != nil {
			return false
		}
		var c struct {
			Members []struct {
				Name string         `json:"name"`
				Tags map[string]any `json:"tags"`
			} `json:"members"`
		}
		if json.Unmarshal(b, &c) != nil {
			return false
		}
		for _, x := range c.Members {
			if x.Name == m.Name {
				return tagged(x.Tags)
			}
		}
		return false
	})
}
