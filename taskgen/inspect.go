package taskgen

import (
	"hash/fnv"
	"strconv"

	"github.com/mcprl/mcprl/look"
	"github.com/mcprl/mcprl/sandbox/sqllex"
)

// This file is the look before the query: where a careful engineer would
// check first (the tables a database has, the values a column really
// takes, the columns a table has), a golden does, then queries. It is a
// happy path with more steps, never a recovery: the look always shows rows.

// look returns the inspection step c's golden starts with, when c is one
// of the Options.InspectShare tasks that get one (chosen by a hash of its
// oracle and the seed, so that the share does not change which questions
// are drawn).
func (g *gen) look(c *cand) (step, bool) {
	if !lookable(c) || !g.inspects(c.oracle) {
		return step{}, false
	}
	say, sql, ok := look.Before(c.steps[0].sql)
	if !ok {
		return step{}, false
	}
	return step{say: say, sql: sql}, true
}

// tables returns the first step of c's golden when c is one of the
// Options.TablesShare tasks whose golden lists the database's tables
// before anything else (chosen as the look's are, independently of them).
func (g *gen) tables(c *cand) (step, bool) {
	if !lookable(c) || !g.share(g.opts.TablesShare, "tables", c.oracle) {
		return step{}, false
	}
	sql := look.SQLiteTables
	if g.db.Dialect() == sqllex.PostgreSQL {
		sql = look.PostgresTables
	}
	return step{say: "First I list the database's tables.", sql: sql}, true
}

// lookable reports whether c's golden may look before it queries: an
// ordinary question answered by a query (edge cases have no golden, and a
// lint task's is a linter run).
func lookable(c *cand) bool { return !IsEdgeCase(c.cat) && c.cat != "lint" && len(c.steps) > 0 }

// inspects reports whether the task with this oracle gets a two-step
// golden that looks first (Options.InspectShare).
func (g *gen) inspects(oracle string) bool { return g.share(*g.opts.InspectShare, "", oracle) }

// share reports whether the task with this oracle is among the given share
// of those a two-step golden of the named kind applies to: a hash of the
// kind, the oracle and the seed below the share, so that the share does not
// change which questions are drawn, and the kinds are chosen independently.
// The look's kind is "", as it was before there were others.
func (g *gen) share(share float64, kind, oracle string) bool {
	if share <= 0 {
		return false
	}
	h := fnv.New64a()
	if kind != "" {
		h.Write([]byte(kind + "\x00"))
	}
	h.Write([]byte(strconv.FormatUint(g.opts.Seed, 10) + "\x00" + oracle))
	return float64(h.Sum64()%1_000_000) < share*1_000_000
}

// lookup is a golden's first call, which finds one row's key, and the
// query that then uses that key (then).
type lookup struct {
	say, sql string
	next     func(key string) string
}

// then returns l with next as its second query.
func (l *lookup) then(next func(key string) string) *lookup {
	return &lookup{say: l.say, sql: l.sql, next: next}
}

// lookupSteps returns the lookup's two steps, its second query on the key
// its first returns live, or steps unchanged (false) where the first does
// not return exactly one non-NULL key: a golden never reads an empty,
// ambiguous or failed result.
func (g *gen) lookupSteps(l *lookup, steps []step) ([]step, bool) {
	res, err := g.db.Query(g.ctx, l.sql)
	if err != nil || res.Truncated || len(res.Rows) != 1 || len(res.Columns) != 1 || res.Rows[0][0] == nil {
		return steps, false
	}
	return []step{{l.say, l.sql}, {"", l.next(literal(res.Rows[0][0]))}}, true
}
