package engine

import "fmt"

// refusal returns the first finding a module planned for the host that
// the policy has not accepted (plan.ModulePlan.Refuse): apply then fails
// the host before changing anything on it, rather than after the modules
// ahead of the refusing one have acted.
func refusal(hr *hostRun) error {
	for _, st := range hr.steps {
		if st.plan != nil && st.plan.Refuse != nil {
			return fmt.Errorf("%s: %s: %w", hr.host.Name, st.module.Name(), st.plan.Refuse)
		}
	}
	return nil
}
