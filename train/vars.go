package train

import (
	"sort"
	"strings"

	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/mcprl/mcprl/model"
)

// TrainableVariables returns m's trainable variables (not the optimizer's
// state) in a fixed order: what a training step differentiates and updates.
func TrainableVariables(m *model.Model) []*mlctx.Variable {
	var vars []*mlctx.Variable
	for v := range m.Ctx.IterVariables() {
		if v.Trainable && !strings.HasPrefix(v.Scope(), OptimizerScope) {
			vars = append(vars, v)
		}
	}
	sort.Slice(vars, func(i, j int) bool { return vars[i].ScopeAndName() < vars[j].ScopeAndName() })
	return vars
}

// SequenceBucket is the padded length of a training batch whose longest
// sequence has n tokens: the next multiple of 64. Every distinct length
// compiles a graph once; multiples of 64 keep padding under 64 tokens while
// a run sees only a few lengths.
func SequenceBucket(n int) int { return max((n+63)/64*64, 64) }
