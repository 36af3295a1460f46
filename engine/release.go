package engine

import "github.com/pgtune/pgtune/engine/report"

// keepOnlyReport trims a planned host to what its report shows, once no
// Apply follows (check, explain): each module's plan.State (the files to
// write, whole) is let go, and the changes are masked in place, so the
// report shares the plan's strings instead of holding a masked copy of
// every file beside them. A fleet's check then holds one copy of each
// host's files, not three. The files read with the facts go too.
func keepOnlyReport(hr *hostRun) {
	if hr.facts != nil {
		hr.facts.Files = nil // read for the check, done (prefetch.go)
	}
	for _, st := range hr.steps {
		if st.plan != nil {
			st.plan.State = nil
			report.MaskPlan(st.plan.Changes)
		}
	}
}
