package pgconf

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePatroni answers GET /patroni, GET /cluster and POST /switchover as
// Patroni 3.0 does, for members a (the leader asked), b and c.
type fakePatroni struct {
	mu          *sync.Mutex
	leader      string // "" none
	leaderState string
	pause       bool
	postmaster  string
	timeline    int64
	posts       int
	code        int
	answer      string
	// after the POST, each GET /cluster calls step (n counts them).
	step  func(f *fakePatroni, n int)
	polls int
}

func (f *fakePatroni) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.Method + " " + r.URL.Path {
	case "GET /patroni":
		role := "replica"
		if f.leader == "a" {
			role = "master"
		}
		json.NewEncoder(w).Encode(map[string]any{"state": "running", "role": role, "pause": false,
			"timeline": f.timeline, "postmaster_start_time": f.postmaster})
	case "GET /cluster":
		if f.posts > 0 && f.step != nil {
			f.polls++
			f.step(f, f.polls)
		}
		var ms []map[string]any
		for _, n := range []string{"a", "b", "c"} {
			m := map[string]any{"name": n, "role": "replica", "state": "streaming", "lag": 0}
			if n == f.leader {
				m = map[string]any{"name": n, "role": "leader", "state": f.leaderState}
			}
			ms = append(ms, m)
		}
		c := map[string]any{"members": ms}
		if f.pause {
			c["pause"] = true
		}
		json.NewEncoder(w).Encode(c)
	case "POST /switchover":
		f.posts++
		w.WriteHeader(f.code)
		w.Write([]byte(f.answer))
	default:
		http.NotFound(w, r)
	}
}

// Whatever Patroni answers, pgtune posts one switchover and reports what
// became of it from the cluster's leader: refused before or by Patroni,
// dropped, moved (to the candidate or not), leaderless, or given back.
func TestPatroniSwitchoverOutcomes(t *testing.T) {
	old := switchoverSettle
	defer func() { switchoverSettle = old }()
	tests := []struct {
		name string
		// expires: the case ends when pgtune stops waiting (a short
		// bound); the others end on the state the fake reaches.
		expires bool
		fake    fakePatroni
		posts   int
		want    switchoverResult
		err     string
	}{
		{name: "refused by Patroni",
			fake:  fakePatroni{code: 412, answer: "switchover is not possible: no good candidates have been found"},
			posts: 1, want: switchoverResult{Candidate: "b"},
			err: `Patroni refused the switchover to "b"`},
		{name: "DCS not written",
			fake:  fakePatroni{code: 503, answer: "failed to write switchover key into DCS"},
			posts: 1, want: switchoverResult{Candidate: "b"}, err: "HTTP 503: failed to write"},
		{name: "paused since check",
			fake: fakePatroni{pause: true}, err: "paused"},
		{name: "not the leader any more",
			fake: fakePatroni{leader: "c"}, err: `leader "c"`},
		{name: "dropped: the leader stays",
			fake:  fakePatroni{code: 503, answer: "Switchover failed"},
			posts: 1, want: switchoverResult{Candidate: "b", Asked: true},
			err: `Patroni did not switch over to "b" (HTTP 503: Switchover failed): it kept this member as the leader`},
		{name: "status unknown, then moved",
			fake: fakePatroni{code: 503, answer: "Switchover status unknown", step: func(f *fakePatroni, n int) {
				switch n {
				case 1:
					f.leader = ""
				case 3:
					f.leader, f.leaderState = "b", "running"
				}
			}},
			posts: 1, want: switchoverResult{Candidate: "b", Asked: true, Moved: true, NewLeader: "b"}},
		{name: "moved to another member",
			fake: fakePatroni{code: 200, answer: `Switched over to "c" instead of "b"`, step: func(f *fakePatroni, n int) {
				f.leader = "c"
			}},
			posts: 1, want: switchoverResult{Candidate: "b", Asked: true, Moved: true, NewLeader: "c"}},
		{name: "leaderless", expires: true,
			fake: fakePatroni{code: 503, answer: "Switchover status unknown", step: func(f *fakePatroni, n int) {
				f.leader = ""
			}},
			posts: 1, want: switchoverResult{Candidate: "b", Asked: true, Leaderless: true},
			err: "no member runs as the leader"},
		{name: "demoted and leader again",
			fake: fakePatroni{code: 503, answer: "Switchover failed", step: func(f *fakePatroni, n int) {
				f.postmaster, f.timeline = "2026-12-02 00:00:09", 3
			}},
			posts: 1, want: switchoverResult{Candidate: "b", Asked: true, Restarted: true},
			err: "gave it the leader role back (timeline 2 → 3)"},
		{name: "still the leader when pgtune stops waiting", expires: true,
			fake:  fakePatroni{code: 503, answer: "Switchover status unknown"},
			posts: 1, want: switchoverResult{Candidate: "b", Asked: true},
			err: "may still be pending"},
		{name: "no answer, then moved",
			fake: fakePatroni{code: 0, step: func(f *fakePatroni, n int) {
				f.leader = "b"
			}},
			posts: 1, want: switchoverResult{Candidate: "b", Asked: true, Moved: true, NewLeader: "b"}},
	}
	for i := range tests {
		tt := &tests[i]
		t.Run(tt.name, func(t *testing.T) {
			switchoverSettle = time.Minute
			if tt.expires {
				switchoverSettle = 2 * time.Second
			}
			f := &tt.fake
			f.mu = new(sync.Mutex)
			if f.leader == "" {
				f.leader = "a"
			}
			f.leaderState, f.postmaster, f.timeline = "running", "2026-12-02 00:00:00", 2
			var srv *httptest.Server
			if f.code == 0 {
				// The connection drops before any answer.
				srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == "POST" {
						f.mu.Lock()
						f.posts++
						f.mu.Unlock()
						hj, _ := w.(http.Hijacker)
						c, _, _ := hj.Hijack()
						c.Close()
						return
					}
					f.ServeHTTP(w, r)
				}))
			} else {
				srv = httptest.NewServer(f)
			}
			defer srv.Close()
			tg, _, owner := restTarget(t)
			api := patroniAPI{URL: srv.URL, Owner: owner, Member: "a"}
			got, err := api.switchover(context.Background(), tg, &PatroniState{Scope: "c1", Member: "a"})
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("error %v, want %q", err, tt.err)
			}
			if got != tt.want {
				t.Errorf("result %+v, want %+v", got, tt.want)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.posts != tt.posts {
				t.Errorf("%d POST /switchover, want %d", f.posts, tt.posts)
			}
		})
	}
}
