package facts

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
)

// Discovery asks only the member's own REST API: loopback answers, an
// address not on this host (192.0.2.1, TEST-NET: bind fails, nothing is
// sent) is refused naming the member and the address, a redirect is not
// followed.
func TestAskPatroniOnlyLocal(t *testing.T) {
	u, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	var followed bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed = true }))
	defer other.Close()
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	}))
	defer redir.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/patroni" {
			io.WriteString(w, `{"state":"running","role":"replica","patroni":{"scope":"demo","name":"n2"}}`)
			return
		}
		io.WriteString(w, `{"members":[{"name":"n2","role":"replica","state":"streaming","lag":0}]}`)
	}))
	defer ok.Close()
	for _, tc := range []struct{ url, wantErr string }{
		{ok.URL, ""},
		{"http://192.0.2.1:8008", `"n2": REST API address '192.0.2.1' (192.0.2.1) is not on this host`},
		{"https://192.0.2.1:8008", "is not on this host"},
		{redir.URL, "no answer"},
	} {
		p := &Patroni{Name: "n2", APIURL: tc.url}
		askPatroni(context.Background(), transport.NewLocal(), false, u.Username, p)
		if tc.wantErr == "" {
			if p.APIError != "" || p.Role != "replica" || len(p.Members) != 1 {
				t.Errorf("%s: %+v", tc.url, p)
			}
			continue
		}
		if !strings.Contains(p.APIError, tc.wantErr) {
			t.Errorf("%s: APIError %q, want %q", tc.url, p.APIError, tc.wantErr)
		}
	}
	if followed {
		t.Error("a redirect was followed")
	}
}

// TestReadMembersHost: GET /cluster's host (the member's
// postgresql.connect_address) is kept: the primary's list ties a
// standby's Patroni name to an address the controller knows it by. Its
// port, whatever it holds, is not read.
func TestReadMembersHost(t *testing.T) {
	p := &Patroni{}
	err := p.readMembers([]byte(`{"members":[{"name":"n1","role":"leader","state":"running","host":"10.0.0.1","port":5432,"api_url":"http://10.0.0.1:8008/patroni"},
		{"name":"n2","role":"replica","state":"streaming","host":"db2.example","port":"x","lag":0},{"name":"n3","role":"replica","state":"stopped"}]}`))
	want := []PatroniMember{{Name: "n1", Role: "leader", State: "running", Lag: -1, Host: "10.0.0.1"},
		{Name: "n2", Role: "replica", State: "streaming", Lag: 0, Host: "db2.example"}, {Name: "n3", Role: "replica", State: "stopped", Lag: -1}}
	if err != nil || !reflect.DeepEqual(p.Members, want) {
		t.Errorf("readMembers = %+v, %v\nwant %+v", p.Members, err, want)
	}
}

// TestAskPatroniOnlyOwnersListener: a local listener another user runs
// (here root, the test, asked as nobody: any user may bind an address and
// port the member's API leaves free) is refused once connected, before
// anything is sent: no request reaches it.
func TestAskPatroniOnlyOwnersListener(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root: asks as nobody a listener root runs")
	}
	if _, err := user.Lookup("nobody"); err != nil {
		t.Fatal(err)
	}
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		io.WriteString(w, `{"state":"running","role":"master","patroni":{"scope":"demo","name":"n1"}}`)
	}))
	defer srv.Close()
	p := &Patroni{Name: "n1", APIURL: srv.URL}
	askPatroni(context.Background(), transport.NewLocal(), false, "nobody", p)
	if !strings.Contains(p.APIError, "is served by uid 0, not the cluster owner") || p.Role != "" {
		t.Errorf("asked as nobody a listener root runs: %+v", p)
	}
	if n := got.Load(); n != 0 {
		t.Errorf("%d request(s) reached the other user's listener", n)
	}
}
