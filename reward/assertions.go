package reward

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/sandbox/sqldb"
	"github.com/mcprl/mcprl/sandbox/sqllex"
	"github.com/mcprl/mcprl/task"
)

// Assertions scores a trajectory by its task's ground_truth_assertions
// and state_assertions, with partial credit (the share that hold; see
// Score for which database each reads). A SQL assertion (SELECT or WITH)
// is an oracle; it holds when the agent surfaced the same result: a
// successful query_database observation with the same rows
// (order-insensitive unless the oracle has ORDER BY; values compared
// type-tolerantly: 3, 3.0 and "3" are equal), or, for a one-cell result,
// that value as a whole token in the final answer when a query's result
// shows it (see below). A query whose result matched is run
// again beside the oracle on Variants copies of the data with rows removed
// and must match there too: a filter on the wrong value that happens to
// count as many rows does not hold (nor does an answer that states the
// value such a query returned). Where the task has witness_sql it must
// also match on the copy those statements changed: a question whose answer
// is empty (no rows, a count of 0) is matched by any query that returns
// nothing, or by SELECT 0, on the live data and on every thinned copy. An answer that states a one-cell oracle's
// value holds only when a query's result shows it (among its cells, or as
// its row count) on the live data and the copies alike: a value no result
// shows cannot be told from a guess.
// Any other assertion is an expr-lang/expr boolean expression over Facts,
// compiled once and cached.
type Assertions struct {
	mu       sync.Mutex
	programs map[string]*vm.Program
}

// NewAssertions returns an assertion checker with an empty program cache.
func NewAssertions() *Assertions { return &Assertions{programs: map[string]*vm.Program{}} }

// Name implements Func.
func (*Assertions) Name() string { return "assertions" }

// NeedsSandbox implements Live.
func (*Assertions) NeedsSandbox() bool { return true }

// Facts are what an expression assertion can read.
type Facts struct {
	// ExitCode is the exit code of the last run_linter call, nil when
	// run_linter was never called successfully.
	ExitCode any `expr:"exit_code"`
	// ToolCalls counts the well-formed tool calls; FailedCalls those whose
	// tool reported an error; MalformedCalls the unparseable ones.
	ToolCalls      int `expr:"tool_calls"`
	FailedCalls    int `expr:"failed_calls"`
	MalformedCalls int `expr:"malformed_calls"`
	// Turns counts the assistant turns.
	Turns int `expr:"turns"`
	// Answer is the final assistant text without tool calls.
	Answer string `expr:"answer"`
	// Error is what ended the trajectory early ("" when nothing did).
	Error string `expr:"error"`
	// Truncated is true when the trajectory hit a length or turn limit.
	Truncated bool `expr:"truncated"`
	// Calls lists the names of the well-formed calls, in order.
	Calls []string `expr:"calls"`
	// Called reports whether a tool was called (well-formed) at least once.
	Called func(name string) bool `expr:"called"`
	// ExitCodeOf is the exit code of the last run_linter call on one file
	// (its path as the linter reports it: relative to the workspace,
	// cleaned); an error, which fails the assertion, when that file was
	// never linted. exit_code reads whichever file was linted last, so
	// "exit_code == 0" holds after linting any clean file.
	ExitCodeOf func(path string) (int, error) `expr:"exit_code_of"`
}

// FactsOf gathers the facts of a trajectory.
func FactsOf(t *chat.Trajectory) Facts {
	f := Facts{}
	codes := map[string]int{}
	f.ExitCodeOf = func(p string) (int, error) {
		code, ok := codes[path.Clean(p)]
		if !ok {
			return 0, fmt.Errorf("%s was never linted (no run_linter call on it gave an exit code)", p)
		}
		return code, nil
	}
	if t == nil {
		f.Called = func(string) bool { return false }
		return f
	}
	f.Turns = len(t.Turns)
	f.Answer = t.Answer
	f.Error = t.Error
	f.Truncated = t.Truncated
	called := map[string]bool{}
	for _, turn := range t.Turns {
		for _, c := range turn.Calls {
			if c.ParseError != "" {
				f.MalformedCalls++
				continue
			}
			f.ToolCalls++
			f.Calls = append(f.Calls, c.Call.Name)
			called[c.Call.Name] = true
			if c.IsError {
				f.FailedCalls++
			}
			if c.Call.Name == task.ToolRunLinter {
				if code, ok := exitCode(c); ok {
					f.ExitCode = code
					if p := lintedPath(c); p != "" {
						codes[p] = code
					}
				} else {
					f.ExitCode = nil
				}
			}
		}
	}
	f.Called = func(name string) bool { return called[name] }
	return f
}

var exitCodeText = regexp.MustCompile(`exit code (-?\d+)\s*$`)

// exitCode reads a run_linter observation's exit code: the structured
// "exit_code", else the text's closing "exit code N".
func exitCode(c chat.CallResult) (int, bool) {
	if c.Structured != nil {
		var v struct {
			ExitCode *int `json:"exit_code"`
		}
		if b, err := json.Marshal(c.Structured); err == nil && json.Unmarshal(b, &v) == nil && v.ExitCode != nil {
			return *v.ExitCode, true
		}
	}
	if m := exitCodeText.FindStringSubmatch(c.Text); m != nil {
		n, err := strconv.Atoi(m[1])
		return n, err == nil
	}
	return 0, false
}

// lintedPath is the file a run_linter call linted: the path its structured
// result reports, else its argument, cleaned; "" when neither says.
func lintedPath(c chat.CallResult) string {
	if c.Structured != nil {
		var v struct {
			Path string `json:"path"`
		}
		if b, err := json.Marshal(c.Structured); err == nil && json.Unmarshal(b, &v) == nil && v.Path != "" {
			return path.Clean(v.Path)
		}
	}
	var args struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(c.Call.Arguments, &args) == nil && args.Path != "" {
		return path.Clean(args.Path)
	}
	return ""
}

// IsSQL reports whether an assertion is a SQL query (its first word, past
// comments and parentheses, is SELECT or WITH).
func IsSQL(a string) bool {
	stmts, _ := sqllex.Split(a, sqllex.Options{Dialect: sqllex.SQLite, Lenient: true})
	if len(stmts) == 0 {
		return false
	}
	w := stmts[0].FirstWord()
	return w == "select" || w == "with"
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

var exitCodeIdent = regexp.MustCompile(`\bexit_code\b`)

var exprIdent = regexp.MustCompile(`\bexit_code(?:_of)?\b|\bcalled\(\s*["']([^"']+)["']\s*\)`)

// neededTools infers which tools the assertions need called.
func neededTools(assertions []string) []string {
	set := map[string]bool{}
	for _, a := range assertions {
		if IsSQL(a) {
			set[task.ToolQueryDatabase] = true
			continue
		}
		for _, m := range exprIdent.FindAllStringSubmatch(a, -1) {
			if m[1] != "" {
				set[m[1]] = true
			} else {
				set[task.ToolRunLinter] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// program compiles (once) an expression assertion.
func (a *Assertions) program(src string) (*vm.Program, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.programs == nil {
		a.programs = map[string]*vm.Program{}
	}
	if p, ok := a.programs[src]; ok {
		return p, nil
	}
	p, err := expr.Compile(src, expr.Env(Facts{}), expr.AsBool())
	if err != nil {
		return nil, fmt.Errorf("assertion %q: %w", src, err)
	}
	a.programs[src] = p
	return p, nil
}

// Score implements Func.
//
// A read-only task (no state_assertions) is scored against the fixture as
// it was built: its SQL oracles run there, so a trajectory that wipes,
// rewrites or shadows the data moves only its own answer, and a statement
// of the trajectory that changed the data or the schema adds one more
// check, which fails. A task that asks for a change checks its
// state_assertions on the trajectory's database afterwards, and its
// ground-truth oracles run on that state only once they all hold.
func (a *Assertions) Score(ctx context.Context, in *Input) (Score, error) {
	if in.Task == nil || len(in.Task.GroundTruthAssertions)+len(in.Task.StateAssertions) == 0 {
		return Score{Value: 0, Reason: "the task has no ground_truth_assertions"}, nil
	}
	facts := FactsOf(in.Trajectory)
	var out Score
	held := 0
	add := func(c Check) {
		if c.Held {
			held++
			c.Credit = 1
		}
		out.Checks = append(out.Checks, c)
	}
	writeTask := len(in.Task.StateAssertions) > 0
	stateHolds := true
	for _, src := range in.Task.StateAssertions {
		c, err := checkState(ctx, in, src)
		if err != nil {
			return Score{}, err
		}
		stateHolds = stateHolds && c.Held
		add(c)
	}
	unanswered := ""
	if !writeTask {
		unanswered = unansweredWhy(in.Trajectory)
	}
	for _, src := range in.Task.GroundTruthAssertions {
		var c Check
		var err error
		switch {
		case unanswered != "":
			c = Check{Name: src, Why: unanswered}
		case !IsSQL(src):
			c, err = a.checkExpr(src, facts)
		case writeTask && !stateHolds:
			c = Check{Name: src, Why: "the state_assertions do not hold, so the database is not in the state the question is about"}
		default:
			c, err = a.checkSQL(ctx, in, src, writeTask)
		}
		if err != nil {
			return Score{}, err
		}
		add(c)
	}
	if !writeTask && in.Sandbox != nil && in.Sandbox.DB() != nil {
		if n := in.Sandbox.DB().Writes(); n > 0 {
			add(Check{Name: "read-only", Why: fmt.Sprintf("the task asks for no change, but %d statement(s) of the trajectory changed the database's data or schema", n)})
		}
	}
	out.Value = float64(held) / float64(len(out.Checks))
	out.Reason = fmt.Sprintf("%d of %d assertions hold", held, len(out.Checks))
	return out, nil
}

// unansweredWhy says why a question's trajectory holds no assertion: it was cut off (by max_completion_length
// or max_tool_calling_iterations) before it answered; "" otherwise. Without it a trajectory that queried until
// its rounds ran out, never answering, held every SQL oracle one of its results happened to show, and the GRPO
// policy of the experiment's run 17 learned exactly that (17 of its 18 held-out successes were cut off at the
// round limit, the 18th stopped with no text). A trajectory rebuilt from its tool calls alone (an environment
// session, mcprl score on calls) has no last turn to read and is not judged here (chat.Trajectory.Stopped).
func unansweredWhy(t *chat.Trajectory) string {
	switch {
	case t == nil:
		return ""
	case t.Truncated:
		return "the trajectory was cut off before it answered: a question's assertions hold only for an answer"
	case t.Stopped && strings.TrimSpace(t.Answer) == "":
		return "the trajectory stopped without an answer: a question's assertions hold only for an answer"
	}
	return ""
}

// checkState checks one state assertion on the trajectory's database as
// the trajectory left it: it holds when the query's first row has every
// cell true.
func checkState(ctx context.Context, in *Input, src string) (Check, error) {
	if in.Sandbox == nil || in.Sandbox.DB() == nil {
		return Check{}, fmt.Errorf("state assertion %q needs the trajectory's sandbox", src)
	}
	res, err := in.Sandbox.DB().Oracle(ctx, src)
	if err != nil {
		return Check{}, fmt.Errorf("state assertion %q: %w", src, err)
	}
	if len(res.Rows) == 0 || len(res.Rows[0]) == 0 {
		return Check{Name: src, Why: "state: the query returned no row"}, nil
	}
	for i, v := range res.Rows[0] {
		if !truthy(v) {
			return Check{Name: src, Why: fmt.Sprintf("state: %s is %s after the trajectory", res.Columns[i], canon(v))}, nil
		}
	}
	return Check{Name: src, Held: true, Why: "state: holds after the trajectory"}, nil
}

// truthy is SQL's truth of a cell: non-NULL, non-zero, not false.
func truthy(v any) bool {
	switch c := canon(v); c {
	case "NULL", "false", "0", "":
		return false
	default:
		if f, err := strconv.ParseFloat(c, 64); err == nil {
			return f != 0
		}
		return c != "f"
	}
}

func (a *Assertions) checkExpr(src string, facts Facts) (Check, error) {
	p, err := a.program(src)
	if err != nil {
		// A broken assertion is the task's fault, not the agent's: report it.
		return Check{}, err
	}
	// An assertion about the linter's exit code cannot hold when the linter
	// never ran (else "exit_code != 0" would reward skipping it).
	if facts.ExitCode == nil && exitCodeIdent.MatchString(src) {
		return Check{Name: src, Why: "no run_linter call gave an exit code (never called, or refused), so exit_code is unknown"}, nil
	}
	v, err := expr.Run(p, facts)
	if err != nil {
		return Check{Name: src, Why: "evaluation failed: " + err.Error()}, nil
	}
	if b, _ := v.(bool); b {
		return Check{Name: src, Held: true}, nil
	}
	why := "false"
	if exitCodeIdent.MatchString(src) {
		why = fmt.Sprintf("false: exit_code is %v", facts.ExitCode)
	}
	return Check{Name: src, Why: why}, nil
}

// observed is one successful query_database observation and the SQL that
// produced it.
type observed struct {
	SQL     string   `json:"-"`
	Columns []string `json:"columns"`
	Rows    [][]any  `json:"rows"`
}

func observations(t *chat.Trajectory) []observed {
	var out []observed
	if t == nil {
		return nil
	}
	for _, c := range t.Calls() {
		if c.Call.Name != task.ToolQueryDatabase || c.IsError || c.Structured == nil {
			continue
		}
		b, err := json.Marshal(c.Structured)
		if err != nil {
			continue
		}
		var o observed
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		if dec.Decode(&o) != nil || o.Columns == nil {
			continue
		}
		var args struct {
			SQL string `json:"sql"`
		}
		if json.Unmarshal(c.Call.Arguments, &args) == nil {
			o.SQL = args.SQL
		}
		out = append(out, o)
	}
	return out
}

var orderBy = regexp.MustCompile(`(?i)\border\s+by\b`)

// Variants is how many copies of the trajectory's data, each with about
// half of every table's rows removed, a query that matched an oracle live
// must match it on too (sqldb.DB.Variants). With 2 variants, a filter on
// the wrong value that happened to count the same rows is caught unless
// both copies keep its rows and the oracle's in equal numbers.
const Variants = 3

// oracleDB is where a SQL oracle runs: the fixture as it was built
// (*sqldb.Template) for a read-only task, the trajectory's own database
// (*sqldb.DB) for a task that asked for a change.
type oracleDB interface {
	Oracle(ctx context.Context, sql string) (*sqldb.Result, error)
	Variants(ctx context.Context, n int, oracle string, queries []string) ([][]*sqldb.Result, error)
	Witnessed(ctx context.Context, setup []string, oracle string, queries []string) ([]*sqldb.Result, error)
}

func (a *Assertions) checkSQL(ctx context.Context, in *Input, src string, afterWrites bool) (Check, error) {
	if in.Sandbox == nil || in.Sandbox.DB() == nil {
		return Check{}, fmt.Errorf("assertion %q needs the trajectory's sandbox", src)
	}
	var db oracleDB = in.Sandbox.DB().Template()
	if afterWrites {
		db = in.Sandbox.DB()
	}
	res, err := db.Oracle(ctx, src)
	if err != nil {
		return Check{}, fmt.Errorf("oracle %q: %w", src, err)
	}
	want := canonRows(res.Rows)
	ordered := orderBy.MatchString(src)
	oneCell := len(res.Rows) == 1 && len(res.Columns) == 1
	var cell string // the one-cell oracle's value, canonical
	if oneCell {
		cell = canon(res.Rows[0][0])
	}
	obs := observations(in.Trajectory)
	// The queries whose result is the oracle's and, for a one-cell oracle
	// whose value the answer states, those whose result holds that value in
	// a cell its row's text identifies, or has that many rows (an answer
	// that counted a listing).
	var cands []candidate
	stated := oneCell && in.Trajectory != nil && inAnswer(in.Trajectory.Answer, res.Rows[0][0])
	for _, o := range obs {
		switch {
		case len(o.Columns) == len(res.Columns) && sameRows(canonRows(o.Rows), want, ordered):
			cands = append(cands, candidate{sql: o.SQL, kind: matchRows})
		case stated:
			if at := cellsAt(o.Rows, cell); len(at) > 0 {
				cands = append(cands, candidate{sql: o.SQL, kind: matchCell, at: at})
			}
			if canon(int64(len(o.Rows))) == cell {
				cands = append(cands, candidate{sql: o.SQL, kind: matchCount})
			}
		}
	}
	if len(cands) > 0 {
		// A live match counts when it is no coincidence of the data: the
		// same query matches the oracle on copies with rows removed too.
		sqls := make([]string, len(cands))
		for i, c := range cands {
			sqls[i] = c.sql
		}
		vs, err := db.Variants(ctx, Variants, src, sqls)
		if err != nil {
			return Check{}, fmt.Errorf("oracle %q on copies of the data: %w", src, err)
		}
		var witnessed [][]*sqldb.Result
		if w := in.Task.WitnessSQL; len(w) > 0 {
			// The copy with the rows the question asks about: where the
			// oracle's answer is empty live and on every thinned copy, this
			// is where a query that returns nothing stops agreeing with it.
			r, err := db.Witnessed(ctx, w, src, sqls)
			if err != nil {
				return Check{}, fmt.Errorf("oracle %q on the copy of the data the task's witness_sql made: %w", src, err)
			}
			if r[0].Empty() {
				return Check{}, fmt.Errorf("oracle %q: the task's witness_sql leaves its answer empty (no rows, or 0): its statements failed here or change nothing the question asks about", src)
			}
			witnessed = [][]*sqldb.Result{r}
		}
		all := append(slices.Clone(vs), witnessed...)
		for i, c := range cands {
			if c.matchesOnVariants(all, i+1, ordered) {
				if c.kind == matchRows {
					return Check{Name: src, Held: true, Why: "a query_database result has the oracle's rows"}, nil
				}
				return Check{Name: src, Held: true, Why: fmt.Sprintf("the final answer states the oracle's value %s, which a query_database result shows", cell)}, nil
			}
		}
		if !cands[0].matchesOnVariants(vs, 1, ordered) {
			return Check{Name: src, Why: fmt.Sprintf("a query_database result matched the oracle only by a coincidence of the data: on a copy with rows removed %q and the oracle disagree", shorten(cands[0].sql, 120))}, nil
		}
		return Check{Name: src, Why: fmt.Sprintf("a query_database result matched the oracle only because both return nothing here: on the copy of the data where the task's witness_sql added what the question asks about, %q and the oracle disagree", shorten(cands[0].sql, 120))}, nil
	}
	if oneCell {
		if len(obs) == 0 {
			return Check{Name: src, Why: fmt.Sprintf("the oracle's value %s was never queried (no successful query_database call)", cell)}, nil
		}
		if stated {
			// No query result shows the value: a guess cannot be told from a
			// derivation, and GRPO learned to guess (run 7 of the experiment:
			// a third of its successes answered "2" after a query that
			// returned 0), so a stated value must be shown.
			return Check{Name: src, Why: fmt.Sprintf("the final answer states the oracle's value %s, but no query_database result shows it (as its row count, or in a cell whose row the result's text identifies: a number among a listing's many is no evidence)", cell)}, nil
		}
		return Check{Name: src, Why: fmt.Sprintf("no query result had the oracle's value %s and the final answer does not state it", cell)}, nil
	}
	if len(obs) == 0 {
		return Check{Name: src, Why: "no successful query_database call"}, nil
	}
	return Check{Name: src, Why: fmt.Sprintf("no query result had the oracle's %d rows", len(res.Rows))}, nil
}

// candidate is a query whose live result matched an oracle, and how.
type candidate struct {
	sql  string
	kind int
	at   map[string]bool // matchCell: the cells that held the value live (cellsAt)
}

const (
	matchRows  = iota // the oracle's rows
	matchCell         // the one-cell oracle's value in a cell its row identifies
	matchCount        // as many rows as the one-cell oracle's value
)

// cellsAt returns the cells of rows that hold cell (canonical form) and
// that another copy of the data can point to again: "column index, then the
// row's cells that are not numbers or NULL" (a GROUP BY's label, a name;
// nothing for a one-row aggregate, whose SUM is NULL on a copy without the
// rows it sums), where no other row of rows has the same text.
// A number found in a listing (SELECT id FROM customers shows every count
// up to 36; SELECT * FROM orders, a few hundred numbers) has no such cell:
// without this, an answer that lists every number from 0 to 40 held any
// count's oracle beside such a query, on the data and on most copies with
// rows removed alike.
func cellsAt(rows [][]any, cell string) map[string]bool {
	keys := make([]string, len(rows))
	seen := map[string]int{}
	for i, r := range rows {
		var b strings.Builder
		for j, v := range r {
			if c := canon(v); v != nil && !isNumber(c) {
				fmt.Fprintf(&b, "%d=%q,", j, c)
			}
		}
		keys[i] = b.String()
		seen[keys[i]]++
	}
	var at map[string]bool
	for i, r := range rows {
		if seen[keys[i]] != 1 {
			continue
		}
		for j, v := range r {
			if canon(v) == cell {
				if at == nil {
					at = map[string]bool{}
				}
				at[fmt.Sprintf("%d:%s", j, keys[i])] = true
			}
		}
	}
	return at
}

// isNumber reports whether a canonical cell spells a number.
func isNumber(c string) bool {
	_, err := strconv.ParseFloat(c, 64)
	return err == nil
}

// matchesOnVariants reports whether the candidate, query j (1...) of vs,
// matches the oracle (0) the same way on every variant where the oracle ran.
func (c candidate) matchesOnVariants(vs [][]*sqldb.Result, j int, ordered bool) bool {
	for _, v := range vs {
		o, q := v[0], v[j]
		if o == nil {
			continue
		}
		if q == nil || c.kind != matchRows && (len(o.Rows) != 1 || len(o.Rows[0]) != 1) {
			return false
		}
		switch c.kind {
		case matchRows:
			if len(q.Columns) != len(o.Columns) || !sameRows(canonRows(q.Rows), canonRows(o.Rows), ordered) {
				return false
			}
		case matchCell:
			// The value is in the same cell on the copy as live.
			at := cellsAt(q.Rows, canon(o.Rows[0][0]))
			found := false
			for k := range c.at {
				found = found || at[k]
			}
			if !found {
				return false
			}
		case matchCount:
			if canon(int64(len(q.Rows))) != canon(o.Rows[0][0]) {
				return false
			}
		}
	}
	return true
}

// shorten cuts s to n bytes for a message.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// canon writes a cell so that equal values of different types (3, 3.0,
// "3", json.Number("3")) compare equal.
func canon(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		return canonFloat(x)
	case json.Number:
		return canonNumber(string(x))
	case string:
		return canonNumber(x)
	case []byte:
		return canonNumber(string(x))
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

func canonFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// canonNumber canonicalises a string that spells a number; other strings
// are returned as they are.
func canonNumber(s string) string {
	t := strings.TrimSpace(s)
	if t == "" {
		return s
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		return strconv.FormatInt(n, 10)
	}
	if c := t[0]; !(c == '-' || c == '+' || c == '.' || c >= '0' && c <= '9') {
		return s // not a number (keeps "NaN", "Inf" words as text)
	}
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		return canonFloat(f)
	}
	return s
}

func canonRows(rows [][]any) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		cells := make([]string, len(r))
		for j, v := range r {
			cells[j] = canon(v)
		}
		out[i] = strings.Join(cells, "\x1f")
	}
	return out
}

func sameRows(got, want []string, ordered bool) bool {
	if len(got) != len(want) {
		return false
	}
	if !ordered {
		got = append([]string(nil), got...)
		want = append([]string(nil), want...)
		sort.Strings(got)
		sort.Strings(want)
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

var numberToken = regexp.MustCompile(`-?\d[\d,]*(?:\.\d+)?`)

// inAnswer reports whether the answer states v as a whole token: a number
// compared numerically (thousands separators allowed, 3 matches 3.0), any
// other value case-insensitively between non-word characters.
func inAnswer(answer string, v any) bool {
	c := canon(v)
	if _, err := strconv.ParseFloat(c, 64); err == nil {
		for _, loc := range numberToken.FindAllStringIndex(answer, -1) {
			if loc[0] > 0 && (isWordByte(answer[loc[0]-1]) || answer[loc[0]-1] == '.') {
				continue
			}
			if loc[1] < len(answer) && isWordByte(answer[loc[1]]) {
				continue
			}
			tok := strings.TrimRight(strings.ReplaceAll(answer[loc[0]:loc[1]], ",", ""), ",")
			if canonNumber(tok) == c {
				return true
			}
		}
		return false
	}
	if c == "" {
		return false
	}
	re, err := regexp.Compile(`(?i)(^|[^\pL\pN_])` + regexp.QuoteMeta(c) + `($|[^\pL\pN_])`)
	return err == nil && re.MatchString(answer)
}
