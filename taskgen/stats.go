package taskgen

import (
	"fmt"
	"strings"

	"github.com/mcprl/mcprl/task"
)

// Stats counts a set of generated tasks.
type Stats struct {
	PerCategory map[string]int
	// EdgeCases counts the tasks without a golden trajectory.
	EdgeCases int
	// Inspecting counts the goldens that look (more than one call) before
	// they query.
	Inspecting int
}

// Count returns the stats of tasks.
func Count(tasks []task.Task) Stats {
	s := Stats{PerCategory: map[string]int{}}
	for i := range tasks {
		s.PerCategory[tasks[i].Category]++
		if IsEdgeCase(tasks[i].Category) {
			s.EdgeCases++
		}
		calls := 0
		for _, m := range tasks[i].Golden {
			calls += len(m.ToolCalls)
		}
		if calls > 1 {
			s.Inspecting++
		}
	}
	return s
}

// String is " CATEGORY N ..." over Categories, then "; E edge cases without
// a golden trajectory; I goldens look before they query".
func (s Stats) String() string {
	var b strings.Builder
	for _, c := range Categories {
		fmt.Fprintf(&b, " %s %d", c, s.PerCategory[c])
	}
	fmt.Fprintf(&b, "; %d edge cases without a golden trajectory; %d goldens look before they query", s.EdgeCases, s.Inspecting)
	return b.String()
}
