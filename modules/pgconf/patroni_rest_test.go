package pgconf

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/transport"
)

// recordingTransport runs commands on this machine and keeps them.
type recordingTransport struct {
	transport.Transport
	cmds []transport.Command
}

func (r *recordingTransport) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	r.cmds = append(r.cmds, cmd)
	cmd.Become = false // never sudo in a test: the owner is the test's user
	return r.Transport.Run(ctx, cmd)
}

func restTarget(t *testing.T) (*engine.Target, *recordingTransport, string) {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	rt := &recordingTransport{Transport: transport.NewLocal()}
	return &engine.Target{Name: "local", Transport: rt, Become: true}, rt, u.Username
}

// The helper runs as the cluster owner from cd /, with python3 -I, and
// the credentials go on stdin only.
func TestPatroniRESTRunsAsOwnerIsolated(t *testing.T) {
	var gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		io.WriteString(w, `{"state":"running","role":"primary"}`)
	}))
	defer srv.Close()
	tg, rt, owner := restTarget(t)
	api := patroniAPI{URL: srv.URL, Auth: "patroni:s3cret", Owner: owner, Member: "m1"}
	st, err := api.status(context.Background(), tg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Role != "primary" || gotAuth == "" {
		t.Fatalf("status %+v, auth %q", st, gotAuth)
	}
	if len(rt.cmds) != 1 {
		t.Fatalf("%d commands", len(rt.cmds))
	}
	c := rt.cmds[0]
	if c.Args[0] != "sh" || c.Args[2] != ownerScript || c.Args[4] != owner || c.Args[5] != patroniRESTCommand {
		t.Errorf("not run through the owner script as %s: %q", owner, c.Args[:6])
	}
	if !strings.Contains(ownerScript, "cd /\n") || !strings.Contains(patroniRESTCommand, "python3 -I -c") {
		t.Errorf("owner script without cd / or helper without python3 -I")
	}
	for _, a := range c.Args {
		if strings.Contains(a, "s3cret") {
			t.Errorf("credentials on the command line: %q", a)
		}
	}
	if string(c.Stdin) != "patroni:s3cret" {
		t.Errorf("stdin %q", c.Stdin)
	}
}

// A REST address that is not this host's own is refused before anything
// is sent (192.0.2.1 is TEST-NET: bind fails, nothing connects); a
// redirect is refused, and the Authorization header does not follow it.
func TestPatroniRESTRefusals(t *testing.T) {
	var followed bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followed = true
	}))
	defer other.Close()
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/restart", http.StatusTemporaryRedirect)
	}))
	defer redir.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "{}")
	}))
	defer ok.Close()
	tg, _, owner := restTarget(t)
	for _, tc := range []struct {
		url, want string
	}{
		{"http://192.0.2.1:8008", "is not on this host"},
		{"https://192.0.2.1:8008", "is not on this host"},
		{redir.URL, "redirect"},
		{ok.URL, ""},
		{strings.Replace(ok.URL, "127.0.0.1", "localhost", 1), ""},
	} {
		api := patroniAPI{URL: tc.url, Auth: "a:b", Owner: owner, Member: "m2"}
		_, err := api.post(context.Background(), tg, "/restart", map[string]any{}, 5*time.Second)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.url, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.url, err, tc.want)
		}
		if tc.want == "is not on this host" && !strings.Contains(err.Error(), "'m2'") {
			t.Errorf("%s: error does not name the member: %v", tc.url, err)
		}
	}
	if followed {
		t.Error("the redirect was followed")
	}
}
