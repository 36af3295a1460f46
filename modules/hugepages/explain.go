package hugepages

import (
	"fmt"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/plan"
)

// Explain shows how the pool becomes whole pages (pgtune explain).
func (m *Module) Explain(t *engine.Target, params any, p *plan.ModulePlan) []string {
	pages, _ := p.Outputs["pages"].(int64)
	size, _ := p.Outputs["page_size"].(int64)
	pool, _ := p.Outputs["pool"].(int64)
	if size <= 0 {
		return nil
	}
	return []string{
		fmt.Sprintf("vm.nr_hugepages = floor(pool / facts.hugepage_size) = floor(pool / %d) = %d pages", size, pages),
		fmt.Sprintf("hugepages.pool = %d pages × %d = %d bytes", pages, size, pool),
	}
}
