package engine

// dropApplyState forgets what each module kept for Apply (plan.State: the
// files to write, whole) once a host is planned and no Apply follows
// (check, explain): a fleet's check then holds only what its report shows.
func dropApplyState(hr *hostRun) {
	for _, st := range hr.steps {
		if st.plan != nil {
			st.plan.State = nil
		}
	}
}
