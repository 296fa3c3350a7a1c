package taskgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/sandbox/sqldb"
	"github.com/mcprl/mcprl/task"
)

// Ordinary are the categories of tasks with a golden trajectory of one
// tool call: what a team can demonstrate.
var Ordinary = []string{"count", "filter", "list", "join", "null", "date", "empty", "lint"}

// EdgeCases are the categories of tasks without a golden trajectory, where
// the natural first attempt fails:
//
//   - case-variants: the value is stored in several spellings (case,
//     stray spaces), so an exact match counts too few rows;
//   - empty-first: the question writes a value in another case than the
//     stored one, so an exact match comes back empty;
//   - nulls: "other than X, counting those with none", which <> alone
//     misses (NULL <> X is not true);
//   - renamed-column: the question's word for a column is a synonym, so
//     the query names a column that does not exist;
//   - look-alike-column: the question names a column by a near variant of
//     its name (active for is_active, last login for last_login_at);
//   - sql-error: the question names a table by another word (clients,
//     the customer table), so the query fails with no such table;
//   - lint-first: a workspace file fails the linter, and the answer must
//     name what the linter found and say it is missing or wrong.
var EdgeCases = []string{"case-variants", "empty-first", "nulls", "renamed-column", "look-alike-column", "sql-error", "lint-first"}

// Categories of generated tasks, in the order the generator cycles through
// them: the ordinary ones, then the edge cases.
var Categories = append(slices.Clone(Ordinary), EdgeCases...)

// IsEdgeCase reports whether category names an edge case (a task generated
// without a golden trajectory).
func IsEdgeCase(category string) bool { return slices.Contains(EdgeCases, category) }

// DefaultN is the number of tasks Generate writes when Options.N is zero.
const DefaultN = 100

// DefaultMaxListRows bounds the rows a list task's answer may hold.
const DefaultMaxListRows = 25

// DefaultInspectShare is the share of ordinary tasks with a two-step golden
// (look, then query) when Options.InspectShare is nil: what the experiment
// uses (docs/tasks.md).
const DefaultInspectShare = 0.5

// Options configures Generate.
type Options struct {
	// N is the number of tasks to write (DefaultN when zero). Fewer come
	// back when the fixture does not offer that many distinct questions.
	N int
	// Seed makes the choice of questions, values and wordings reproducible.
	Seed uint64
	// DSN selects the database the fixture is built in: "" is embedded
	// SQLite, a postgres:// URL is PostgreSQL (see sqldb.Options).
	DSN string
	// MaxListRows bounds the rows of list tasks (DefaultMaxListRows when zero).
	MaxListRows int
	// InspectShare is the share of ordinary tasks whose golden looks
	// before it queries (DefaultInspectShare when nil): a first call that
	// reads the distinct values of the column the question filters on, or
	// a few rows of the table it asks about, then the query. Which tasks
	// is fixed by the question, not by the draw of other tasks. Goldens
	// never follow a failed, empty or wrong result: SFT sees no recovery.
	InspectShare *float64
	// LookupShare is the share of the questions about one named row of a
	// parent table ("How many orders does the customer 'James Gosling' have?")
	// whose golden first finds that row's key and then queries the child
	// table by the key it read in the first result: a second call that
	// needs what the first returned, which no other golden does. 0 (the
	// default) answers them with one join.
	LookupShare float64
	// TablesShare is the share of ordinary tasks whose golden first lists
	// the database's tables (SQLite's sqlite_master, PostgreSQL's
	// information_schema), then goes on as it would: the look a careful
	// engineer takes at a schema they have not seen. 0 (the default)
	// lists none.
	TablesShare float64
	// SystemPrompt is every task's system prompt ("": none, the chat
	// template renders the sandbox's tools/list).
	SystemPrompt string

	traps *map[string]string // tests: receives each edge case's natural first query
}

// Generate builds fx's database, inspects it and returns opts.N tasks (or
// as many distinct ones as it offers), deterministic under opts.Seed and
// the backend. Every task's assertions were run against the database and
// its golden trajectory's observations are the database's own answers.
func Generate(ctx context.Context, fx *task.Fixture, opts Options) ([]task.Task, error) {
	if opts.N <= 0 {
		opts.N = DefaultN
	}
	if opts.MaxListRows <= 0 {
		opts.MaxListRows = DefaultMaxListRows
	}
	if opts.InspectShare == nil {
		share := DefaultInspectShare
		opts.InspectShare = &share
	}
	if sh := *opts.InspectShare; sh < 0 || sh > 1 || sh != sh {
		return nil, fmt.Errorf("taskgen: the share of two-step goldens must be in [0, 1], not %g", sh)
	}
	if sh := opts.LookupShare; sh < 0 || sh > 1 || sh != sh {
		return nil, fmt.Errorf("taskgen: the share of lookup goldens must be in [0, 1], not %g", sh)
	}
	if sh := opts.TablesShare; sh < 0 || sh > 1 || sh != sh {
		return nil, fmt.Errorf("taskgen: the share of goldens that list the tables must be in [0, 1], not %g", sh)
	}
	if !slices.Contains(fx.Config.Tools, task.ToolQueryDatabase) {
		return nil, fmt.Errorf("taskgen: fixture %s does not enable %s (sandbox.yaml tools), which every generated task calls", fx.Name, task.ToolQueryDatabase)
	}
	lim := fx.Config.Limits
	tpl, err := sqldb.NewTemplate(ctx, fx.SchemaSQL, fx.DataSQL, sqldb.Options{
		DSN: opts.DSN, StatementTimeout: lim.QueryTimeout, MaxRows: lim.MaxRows, MaxBytes: lim.MaxBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("taskgen: fixture %s: %w", fx.Name, err)
	}
	defer tpl.Close()
	db, err := tpl.Fork(ctx)
	if err != nil {
		return nil, fmt.Errorf("taskgen: fixture %s: %w", fx.Name, err)
	}
	defer db.Close()
	s, err := Inspect(ctx, db, tpl.Backend())
	if err != nil {
		return nil, err
	}
	g := &gen{
		ctx: ctx, db: db, s: s, fx: fx, opts: opts,
		rng:   rand.New(rand.NewPCG(opts.Seed, 0x6d6370726c746773)),
		traps: map[string]string{},
	}
	if slices.Contains(fx.Config.Tools, task.ToolRunLinter) && fx.WorkspaceDir != "" {
		if g.lint, err = lintWorkspace(ctx, fx, tpl, db); err != nil {
			return nil, err
		}
	}
	tasks, err := g.run()
	if err != nil {
		return nil, err
	}
	for i := range tasks {
		tasks[i].SystemPrompt = opts.SystemPrompt
	}
	if opts.traps != nil {
		*opts.traps = g.traps
	}
	return tasks, nil
}

// step is one golden query_database call and what the agent says before it.
type step struct{ say, sql string }

// shape is what an oracle's result must look like.
type shape int

const (
	oneCell shape = iota // a single value that the answer states
	rowList              // rows that a query's result surfaces
)

// trap is how an edge case's natural first query must fail.
type trap int

const (
	trapError trap = iota + 1 // the engine refuses it (no such column or table)
	trapEmpty                 // it returns no rows
	trapWrong                 // it returns other rows than the oracle
)

// cand is one question before it is run against the database.
type cand struct {
	cat     string
	texts   []string // wordings of the same question
	oracle  string   // the ground-truth assertion
	asserts []string // the assertions, when they are not the oracle alone (lint tasks)
	shape   shape
	empty   bool // the oracle must return no rows (rowList) or 0 (oneCell)
	// witness (a question with an empty answer) changes a copy of the data
	// so that the answer is not empty there: the task's witness_sql.
	witness []string
	steps   []step
	answer  func(res *sqldb.Result) string // the final answer, from the oracle's result (one cell) or the golden's last observation (rows)
	lookup  *lookup                        // the two steps that replace steps for Options.LookupShare of the questions that have one

	// An edge case has no steps: the natural first query (trapSQL) must
	// fail as trapWant says, while the oracle gives the answer.
	trapSQL  string
	trapWant trap

	used map[int]bool // wordings already written
	ok   bool         // realized once: its queries ran and its result fits
	msgs []chat.Message
	res  *sqldb.Result // the oracle's result (one cell) or the golden's last observation (rows)
}

type gen struct {
	ctx  context.Context
	db   *sqldb.DB
	s    *Schema
	fx   *task.Fixture
	opts Options
	rng  *rand.Rand
	lint []linted // the workspace's files as the linter saw them

	traps map[string]string // edge-case task id -> its natural first query, which fails
}

func (g *gen) run() ([]task.Task, error) {
	byCat := map[string][]*cand{}
	for _, c := range g.candidates() {
		byCat[c.cat] = append(byCat[c.cat], c)
	}
	for _, cat := range Categories {
		cs := byCat[cat]
		g.rng.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
	}
	var out []task.Task
	seen := map[string]bool{}
	add := func(c *cand, wording int) {
		c.used[wording] = true
		text := c.texts[wording]
		seen[strings.ToLower(text)] = true
		asserts := c.asserts
		if asserts == nil {
			asserts = []string{c.oracle}
		}
		t := task.Task{
			ID:                    fmt.Sprintf("%s-%s-%03d", g.fx.Name, c.cat, len(out)+1),
			Task:                  text,
			GroundTruthAssertions: slices.Clone(asserts),
			WitnessSQL:            slices.Clone(c.witness),
			Fixture:               g.fx.Name,
			Category:              c.cat,
		}
		if !IsEdgeCase(c.cat) {
			t.Golden = append(append([]chat.Message(nil), c.msgs...), chat.Message{Role: "assistant", Content: c.answer(c.res)})
		} else if c.trapSQL != "" {
			g.traps[t.ID] = c.trapSQL
		}
		out = append(out, t)
	}
	// freeWording picks an unused wording whose text is new, or -1.
	freeWording := func(c *cand) int {
		var free []int
		for i, t := range c.texts {
			if !c.used[i] && !seen[strings.ToLower(t)] {
				free = append(free, i)
			}
		}
		if len(free) == 0 {
			return -1
		}
		return pick(g.rng, free)
	}
	// Categories take turns, so that the mix stays balanced: each turn asks
	// a new question of the category, or, when it has none left, another
	// wording of one it already asked.
	next := map[string]int{}
	done := map[string]bool{}
	for len(out) < g.opts.N && len(done) < len(Categories) {
		for _, cat := range Categories {
			if len(out) >= g.opts.N || done[cat] {
				continue
			}
			added := false
			for !added && next[cat] < len(byCat[cat]) {
				c := byCat[cat][next[cat]]
				next[cat]++
				w := freeWording(c)
				if w < 0 {
					continue
				}
				ok, err := g.realize(c)
				if err != nil {
					return nil, err
				}
				if ok {
					add(c, w)
					added = true
				}
			}
			if !added {
				var asked []*cand
				for _, c := range byCat[cat] {
					if c.ok && freeWording(c) >= 0 {
						asked = append(asked, c)
					}
				}
				if len(asked) > 0 {
					c := pick(g.rng, asked)
					add(c, freeWording(c))
					added = true
				}
			}
			if !added {
				done[cat] = true
			}
		}
	}
	return out, nil
}

// realize runs a candidate's golden queries and oracle once and reports
// whether the results fit the question.
func (g *gen) realize(c *cand) (bool, error) {
	if c.ok {
		return true, nil
	}
	if c.res != nil { // tried before and did not fit
		return false, nil
	}
	c.res = &sqldb.Result{}
	if c.trapWant != 0 {
		return g.realizeEdge(c)
	}
	var msgs []chat.Message
	var last *sqldb.Result
	steps, found := c.steps, false
	if c.lookup != nil && g.share(g.opts.LookupShare, "lookup", c.oracle) {
		steps, found = g.lookupSteps(c.lookup, steps)
	}
	if look, ok := g.look(c); ok && !found {
		// The look is kept only where it shows rows, whole: a golden never
		// reads an empty or failed result, and a look that cannot be
		// shown does not change which questions are asked.
		res, err := g.db.Query(g.ctx, look.sql)
		if err == nil && len(res.Rows) > 0 && !res.Truncated {
			steps = append([]step{look}, steps...)
		}
	}
	if tables, ok := g.tables(c); ok {
		if rest := slices.Clone(steps); strings.HasPrefix(rest[0].say, "First ") {
			rest[0].say = "Then " + strings.TrimPrefix(rest[0].say, "First ") // the look (or the lookup) comes second now
			steps = rest
		}
		steps = append([]step{tables}, steps...)
	}
	for _, st := range steps {
		res, err := g.db.Query(g.ctx, st.sql)
		var qe *sqldb.QueryError
		switch {
		case errors.As(err, &qe):
			return false, nil // the engine refused it: the question is not for this database
		case err != nil:
			return false, fmt.Errorf("taskgen: %s: %w", st.sql, err)
		case res.Truncated:
			return false, nil
		}
		args, err := sqlArgs(st.sql)
		if err != nil {
			return false, err
		}
		msgs = append(msgs,
			chat.Message{Role: "assistant", Content: st.say, ToolCalls: []chat.Call{{Name: task.ToolQueryDatabase, Arguments: args}}},
			chat.Message{Role: "tool", Name: task.ToolQueryDatabase, Content: res.Text()})
		last = res
	}
	if last == nil {
		return false, nil
	}
	res, ok, err := g.oracle(c)
	if !ok || err != nil {
		return false, err
	}
	if c.shape == rowList {
		// The golden's last query surfaces the oracle's rows.
		if len(last.Columns) != len(res.Columns) || !sameRows(last.Rows, res.Rows) {
			return false, nil
		}
		res = last // its ORDER BY makes the answer read in order
	}
	if c.empty {
		if ok, err := g.witnessed(c, steps[len(steps)-1].sql); !ok || err != nil {
			return false, err
		}
	}
	c.res, c.msgs, c.ok = res, msgs, true
	return true, nil
}

// witnessed reports whether a question with an empty answer has a witness
// that works: on the copy of the data it changes, the oracle's answer is
// not empty and the golden's last query still gives it.
func (g *gen) witnessed(c *cand, golden string) (bool, error) {
	if len(c.witness) == 0 {
		return false, nil
	}
	w, err := g.db.Witnessed(g.ctx, c.witness, c.oracle, []string{golden})
	if err != nil {
		if g.ctx.Err() != nil {
			return false, g.ctx.Err()
		}
		return false, nil // the statement does not fit this database: no question
	}
	o, q := w[0], w[1]
	if o == nil || q == nil || len(o.Rows) == 0 || len(q.Columns) != len(o.Columns) || !sameRows(q.Rows, o.Rows) {
		return false, nil
	}
	return !(c.shape == oneCell && o.Empty()), nil
}

// oracle runs a candidate's oracle and reports whether its result has the
// question's shape.
func (g *gen) oracle(c *cand) (*sqldb.Result, bool, error) {
	res, err := g.db.Oracle(g.ctx, c.oracle)
	if err != nil {
		return nil, false, g.ctx.Err()
	}
	if res.Truncated {
		return nil, false, nil
	}
	switch c.shape {
	case oneCell:
		if len(res.Rows) != 1 || len(res.Columns) != 1 || res.Rows[0][0] == nil {
			return nil, false, nil
		}
		if zero := show(res.Rows[0][0]) == "0"; zero != c.empty {
			return nil, false, nil
		}
	case rowList:
		if n := len(res.Rows); c.empty != (n == 0) || n > g.opts.MaxListRows {
			return nil, false, nil
		}
	}
	return res, true, nil
}

// realizeEdge checks an edge case: the oracle's result fits the question
// and the natural first query fails the way the category says.
func (g *gen) realizeEdge(c *cand) (bool, error) {
	res, ok, err := g.oracle(c)
	if !ok || err != nil {
		return false, err
	}
	got, err := g.db.Query(g.ctx, c.trapSQL)
	var qe *sqldb.QueryError
	switch {
	case err != nil && !errors.As(err, &qe):
		return false, fmt.Errorf("taskgen: %s: %w", c.trapSQL, err)
	case c.trapWant == trapError:
		ok = err != nil
	case err != nil || got.Truncated:
		ok = false
	case c.trapWant == trapEmpty:
		ok = len(got.Rows) == 0
	case c.trapWant == trapWrong:
		ok = !sameRows(got.Rows, res.Rows)
	}
	if !ok {
		return false, nil
	}
	c.res, c.ok = res, true
	return true, nil
}

// sqlArgs writes {"sql": ...} without HTML escaping (SQL has < and >).
func sqlArgs(sql string) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		SQL string `json:"sql"`
	}{sql}); err != nil {
		return nil, err
	}
	return json.RawMessage(bytes.TrimSpace(b.Bytes())), nil
}

func canonCell(v any) string {
	if f, ok := asFloat(v); ok {
		if _, isStr := v.(string); !isStr {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
	return show(v)
}

func sameRows(a, b [][]any) bool {
	key := func(rows [][]any) []string {
		out := make([]string, len(rows))
		for i, r := range rows {
			cells := make([]string, len(r))
			for j, v := range r {
				cells[j] = canonCell(v)
			}
			out[i] = strings.Join(cells, "\x1f")
		}
		sort.Strings(out)
		return out
	}
	ka, kb := key(a), key(b)
	if len(ka) != len(kb) {
		return false
	}
	for i := range ka {
		if ka[i] != kb[i] {
			return false
		}
	}
	return true
}
