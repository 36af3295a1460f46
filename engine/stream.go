package engine

import "github.com/pgtune/pgtune/engine/report"

// hostDone tells Runner.HostDone one host's outcome for the phase that
// just ended for it. The entry is built by Report over that host alone, so
// a streamed result and the final report never disagree.
func (s *Session) hostDone(hr *hostRun) {
	if s.runner.HostDone == nil || s.phase == "" {
		return
	}
	mode := "check"
	if s.phase == "apply" {
		mode = "apply"
	}
	one := &Session{runner: s.runner, book: s.book, hosts: []*hostRun{hr}}
	s.runner.HostDone(s.phase, one.Report(mode).Hosts[0])
}

// annotate adds what the text rendering needs beyond the JSON contract:
// the host's huge page size, to show a page count as memory.
func annotate(h *report.Host, hr *hostRun) {
	if hr.facts != nil {
		h.HugePageSize = hr.facts.HugePageSize
	}
}

// Runner is the runner the session runs with (the CLI points its hooks
// and log at the next phase's display).
func (s *Session) Runner() *Runner { return s.runner }
