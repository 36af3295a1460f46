package overcommit

import (
	"fmt"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/plan"
)

// Explain shows the limit formula with the host's numbers (pgtune
// explain): ratio × (MemTotal − pool) + headroom, in kB.
func (m *Module) Explain(t *engine.Target, params any, p *plan.ModulePlan) []string {
	prm, ok := params.(*Params)
	kb, _ := p.Outputs["kbytes"].(int64)
	pool, _ := p.Outputs["pool"].(int64)
	limit, _ := p.Outputs["commit_limit"].(int64)
	if !ok || t.Facts == nil {
		return nil
	}
	var lines []string
	if prm.Kbytes.IsSet() {
		lines = append(lines, fmt.Sprintf("vm.overcommit_kbytes = kbytes = %d", kb))
	} else {
		ratio, err1 := t.Scope.Float64(prm.Ratio)
		headroom, err2 := t.Scope.Int64(prm.Headroom)
		if err1 != nil || err2 != nil {
			return nil
		}
		lines = append(lines, fmt.Sprintf("vm.overcommit_kbytes = floor((ratio × (facts.mem_total − hugepages.pool) + headroom) / 1024)"+
			" = floor((%g × (%d − %d) + %d) / 1024) = %d", ratio, t.Facts.MemTotal, pool, headroom, kb))
	}
	lines = append(lines, fmt.Sprintf("CommitLimit = overcommit_kbytes × 1024 + facts.swap_total = %d × 1024 + %d = %d bytes", kb, t.Facts.SwapTotal, limit))
	return lines
}
