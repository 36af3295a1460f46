package pgconf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pgtune/pgtune/engine"
)

// primary: switchover through Patroni. pgtune asks once (POST /switchover
// from this member to the chosen candidate) and then only watches what
// Patroni did; it never asks a second time, whatever the answer:
//
//   - Patroni refused (HTTP 4xx: leader or candidate not as asked, the
//     candidate unreachable or tagged nofailover, "no good candidates";
//     503 "failed to write … key into DCS"): nothing happened. The same
//     holds for a refusal of pgtune's own just before (cluster paused
//     since check, this member not the leader any more, no candidate).
//   - Patroni accepted: its answer comes after at most about 20 s of its
//     own polling ("Successfully switched over", "Switched over to X
//     instead of Y", "Switchover failed": the request was dropped and
//     the leader stayed, "Switchover status unknown": still under way).
//     pgtune then waits, bounded, until GET /cluster names a running
//     leader: another member (the switchover happened, to the candidate
//     or not), this member again (it did not), or none (pgtune stops
//     there and says so).
//
// Patroni keeps one leader lock in its DCS, so the cluster never has two
// leaders; what pgtune must get right is not to claim "nothing
// restarted" about a member that Patroni did demote, and not to put the
// previous patroni.yml back under a member whose fate it does not know.

// switchoverSettle bounds the wait for the cluster's leader after Patroni
// took a switchover request (a variable for tests).
var switchoverSettle = patroniSettle

// switchoverResult is what became of the switchover pgtune asked for.
type switchoverResult struct {
	Candidate string // the member asked for ("" when refused before asking)
	// Moved: the leader role left this member, to NewLeader (which may
	// not be the candidate: Patroni picks another healthy member when the
	// candidate fails it between its check and the promotion).
	Moved     bool
	NewLeader string
	// Asked: POST /switchover was sent and not refused.
	Asked bool
	// Restarted: this member's server was stopped and started again
	// while it stayed the leader, or won the leader role back (Patroni
	// demoted it, then no other member promoted).
	Restarted bool
	// Leaderless: no member held the leader role when pgtune stopped
	// waiting.
	Leaderless bool
}

// patroniCluster is the part of GET /cluster pgtune reads. Patroni reads
// its DCS afresh for this answer (pause included), unlike GET /patroni,
// which reports what the member saw at its last loop.
type patroniCluster struct {
	Pause   bool `json:"pause"`
	Members []struct {
		Name     string `json:"name"`
		Role     string `json:"role"`
		State    string `json:"state"`
		Timeline int64  `json:"timeline"`
	} `json:"members"`
}

// leader is the member holding the leader role and its state ("" when
// the cluster has none).
func (c *patroniCluster) leader() (name, state string) {
	for _, m := range c.Members {
		if m.Role == "leader" || m.Role == "standby_leader" {
			return m.Name, m.State
		}
	}
	return "", ""
}

// cluster reads GET /cluster.
func (a patroniAPI) cluster(ctx context.Context, t *engine.Target) (*patroniCluster, []byte, error) {
	code, b, err := a.call(ctx, t, "GET", "/cluster", nil, 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	if code != 200 {
		return nil, nil, fmt.Errorf("GET %s/cluster: HTTP %d", a.URL, code)
	}
	var c patroniCluster
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, nil, fmt.Errorf("GET %s/cluster: not Patroni's JSON", a.URL)
	}
	return &c, b, nil
}

// paused says whether the cluster is in pause (maintenance) mode, from
// GET /cluster (the DCS as it is now) or this member's GET /patroni.
func (a patroniAPI) paused(ctx context.Context, t *engine.Target, st *patroniStatus) (bool, error) {
	if st != nil && st.Pause {
		return true, nil
	}
	c, _, err := a.cluster(ctx, t)
	if err != nil {
		return false, err
	}
	return c.Pause, nil
}

// switchover asks Patroni once to hand the leader role from this member
// to the streaming replica with the least lag and no pending restart (so
// already on the new values), and says what became of it; the error is
// nil only when the role moved. It does not wait for this member to run
// as a replica.
func (a patroniAPI) switchover(ctx context.Context, t *engine.Target, ps *PatroniState) (switchoverResult, error) {
	var res switchoverResult
	before, err := a.status(ctx, t)
	if err != nil {
		return res, err
	}
	c, raw, err := a.cluster(ctx, t)
	if err != nil {
		return res, err
	}
	if c.Pause || before.Pause {
		return res, errors.New("the cluster was paused (maintenance mode) since check: pgtune does not switch over a paused cluster; resume it (patronictl resume) and run again")
	}
	if l, _ := c.leader(); l != ps.Member {
		return res, fmt.Errorf("this member is not the leader any more (GET /cluster: leader %s)", orNone(l))
	}
	candidate, err := switchoverCandidate(raw, ps.Member)
	if err != nil {
		return res, err
	}
	res.Candidate = candidate
	code, b, err := a.call(ctx, t, "POST", "/switchover", map[string]string{"leader": ps.Member, "candidate": candidate}, patroniSettle)
	answer := shortAnswer(b)
	if err == nil && (code/100 == 4 || code == 503 && strings.HasPrefix(answer, "failed to write")) {
		return res, fmt.Errorf("Patroni refused the switchover to %q (POST %s/switchover: HTTP %d: %s)", candidate, a.URL, code, answer)
	}
	res.Asked = true
	said := fmt.Sprintf("HTTP %d: %s", code, answer)
	if err != nil {
		said = "no answer: " + err.Error()
	}
	if t.Log != nil {
		t.Log.Info("switchover asked of Patroni", "from", ps.Member, "to", candidate, "answer", said)
	}
	// Patroni dropped the request and kept its leader: "Switchover
	// failed" comes once the failover key is gone.
	dropped := err == nil && code == 503 && answer == "Switchover failed"

	// From here Patroni decides; pgtune watches the leader.
	wctx, cancel := context.WithTimeout(ctx, switchoverSettle)
	defer cancel()
	last := "not asked yet"
	leader := ""
	// look reads the cluster once: whether another member now leads, and
	// this member's state when it still does.
	look := func(c context.Context) (moved bool, state string, ok bool) {
		now, _, cerr := a.cluster(c, t)
		if cerr != nil {
			last = cerr.Error()
			return false, "", false
		}
		leader, state = now.leader()
		last = fmt.Sprintf("leader %s, state %q", orNone(leader), state)
		return leader != "" && leader != ps.Member && state == "running", state, true
	}
	for {
		moved, state, ok := look(wctx)
		if moved {
			res.Moved, res.NewLeader = true, leader
			return res, nil
		}
		if ok && leader == ps.Member && state == "running" && dropped {
			break
		}
		if !pause(wctx, patroniPoll) {
			break
		}
	}
	if leader == "" {
		// The wait ended on a read cut short or failed: one last look,
		// so that the verdict rests on an answer.
		if moved, _, _ := look(context.WithoutCancel(ctx)); moved {
			res.Moved, res.NewLeader = true, leader
			return res, nil
		}
	}
	if leader != ps.Member {
		// No running leader, or an unreadable cluster: Patroni's leader
		// race is its own; pgtune asks nothing more.
		res.Leaderless = true
		return res, fmt.Errorf("Patroni took the switchover to %q (%s) but no member runs as the leader after %v (%s)", candidate, said, switchoverSettle, last)
	}
	// Still (or again) the leader: was it stopped in between?
	if after, serr := a.status(context.WithoutCancel(ctx), t); serr == nil &&
		(after.Postmaster != before.Postmaster || after.Timeline != before.Timeline) {
		res.Restarted = true
		return res, fmt.Errorf("Patroni took the switchover to %q (%s), stopped this member and gave it the leader role back (timeline %d → %d)",
			candidate, said, before.Timeline, after.Timeline)
	}
	if dropped {
		return res, fmt.Errorf("Patroni did not switch over to %q (%s): it kept this member as the leader", candidate, said)
	}
	return res, fmt.Errorf("Patroni did not switch over to %q within %v (%s): this member is still the leader, and the request may still be pending in Patroni's DCS (see patronictl list)",
		candidate, switchoverSettle, said)
}

// patroniSwitchover switches over through Patroni and waits until this
// member runs as a replica of the new leader. A refusal, or a switchover
// Patroni did not carry out, puts the previous patroni.yml back under
// the leader it still is (not restarted); a demoted member that does not
// come back as a replica is put back and restarted on the previous
// values through Patroni, as a replica whose start fails would be; when
// the outcome is not known (no leader) nothing more is done.
func (m *Module) patroniSwitchover(ctx context.Context, t *engine.Target, st *State, api patroniAPI, mark patroniUndo) (done bool, err error) {
	ps := st.Patroni
	res, err := api.switchover(ctx, t, ps)
	to := ""
	if res.Candidate != "" {
		to = fmt.Sprintf(" to %q", res.Candidate)
	}
	switch {
	case res.Leaderless:
		return true, fmt.Errorf("%s: step switchover%s: %v; pgtune asks Patroni nothing more (no second switchover) and leaves %s with the new values (which the pool check passed); find the leader with patronictl list and Patroni's logs",
			ps.where(), to, err, ps.ConfigFile)
	case res.Restarted:
		return true, fmt.Errorf("%s: step switchover%s: %v; it is the leader (writable) on the configuration Patroni wrote (the new values); no second switchover attempted", ps.where(), to, err)
	case err != nil && res.Asked:
		return true, m.patroniPutBack(ctx, t, st, api, mark, false, "step switchover"+to+": "+err.Error()+"; no second switchover attempted")
	case err != nil:
		return true, m.patroniPutBack(ctx, t, st, api, mark, false, "step switchover"+to+": "+err.Error()+"; it is still the leader")
	}
	if t.Log != nil {
		if res.NewLeader != res.Candidate {
			t.Log.Warn("Patroni switched over to another member than the one pgtune asked for", "from", ps.Member, "asked", res.Candidate, "leader", res.NewLeader)
		}
		t.Log.Info("switched over through Patroni", "from", ps.Member, "to", res.NewLeader)
	}
	// Patroni starts the demoted member as a replica on the configuration
	// it now writes (the new values, checked against the pool): a start
	// that fails there (the pool taken meanwhile) is not waited out.
	if err := api.awaitUnless(ctx, t, "the old primary to run as a replica of "+res.NewLeader, func(s *patroniStatus) bool {
		return s.Role == "replica" && s.State == "running"
	}, func(s *patroniStatus) string {
		if s.State == "start failed" {
			return "Patroni's start of it as a replica failed (state \"start failed\"; see the server's log)"
		}
		return ""
	}); err != nil {
		return true, m.patroniPutBack(ctx, t, st, api, mark, true,
			fmt.Sprintf("step start as a replica after the switchover to %q (the leader now): %v", res.NewLeader, err))
	}
	// Patroni demotes by stopping the server and starting it as a
	// replica, on the configuration it now writes: that start may have
	// taken the new values already (Verify checks them).
	if now, err := api.status(ctx, t); err == nil && !now.PendingRestart {
		if t.Log != nil {
			t.Log.Info("the old primary runs as a replica on the new values since the switchover: no restart left", "member", ps.Member)
		}
		return true, nil
	}
	return false, nil
}

// pause waits d; false when ctx ended first.
func pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// switchoverImpossible says, from GET /cluster at check, why no member
// could ever take the leader role from self ("" when one could once the
// replicas are restarted): no other member, or every other one tagged
// nofailover (Patroni refuses to promote those). Their state and pending
// restarts are not held against them: the rollout restarts them first.
func switchoverImpossible(cluster []byte, self string) string {
	var c struct {
		Members []struct {
			Name string         `json:"name"`
			Tags map[string]any `json:"tags"`
		} `json:"members"`
	}
	if err := json.Unmarshal(cluster, &c); err != nil {
		return ""
	}
	var others, nofailover []string
	for _, m := range c.Members {
		if m.Name == self {
			continue
		}
		others = append(others, m.Name)
		if fmt.Sprint(m.Tags["nofailover"]) == "true" {
			nofailover = append(nofailover, m.Name)
		}
	}
	switch {
	case len(others) == 0:
		return "Patroni lists no other member to switch over to"
	case len(nofailover) == len(others):
		return "every other member is tagged nofailover (" + strings.Join(nofailover, ", ") + "): Patroni would refuse to switch over to any"
	}
	return ""
}

// where names the member in errors: its Patroni cluster and name.
func (ps *PatroniState) where() string {
	return fmt.Sprintf("Patroni cluster %q, member %q", ps.Scope, ps.Member)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q", s)
}

// shortAnswer is a REST answer for an error: trimmed, at most 300 bytes.
func shortAnswer(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
