package taskgen_test

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/taskgen"
)

// Generate reads a fixture's live database and writes questions with SQL
// oracles; the ordinary ones with a golden trajectory (one query, then the
// answer), the edge cases without one. The seed fixes the choice.
func ExampleGenerate() {
	fx, err := task.LoadFixture(filepath.Join("testdata", "library"))
	if err != nil {
		panic(err)
	}
	tasks, err := taskgen.Generate(context.Background(), fx, taskgen.Options{N: 14, Seed: 1})
	if err != nil {
		panic(err)
	}
	for _, t := range tasks {
		answer := "(no golden: an edge case)"
		if len(t.Golden) > 0 {
			answer = t.Golden[len(t.Golden)-1].Content
		}
		fmt.Printf("%s: %s\n  %s\n  %s\n", t.Category, t.Task, t.GroundTruthAssertions[0], answer)
	}
	// Output:
	// count: Tell me how many members exist.
	//   SELECT COUNT(*) FROM members
	//   The database holds 22 members.
	// filter: How many books are there whose author is 'T. Morrison'?
	//   SELECT COUNT(*) FROM books WHERE author = 'T. Morrison'
	//   There are 8 books whose author is 'T. Morrison'.
	// list: List the ids of the 3 books with the lowest published year, in order.
	//   SELECT id FROM books WHERE published_year IS NOT NULL ORDER BY published_year ASC, id LIMIT 3
	//   The 3 books with the lowest published year are ids 22, 25 and 21, in that order.
	// join: How many loans are there for the book with title 'The Storm Songs'?
	//   SELECT COUNT(*) FROM loans AS l JOIN books AS b ON b.id = l.book_id WHERE b.title = 'The Storm Songs'
	//   There are 4 loans for The Storm Songs.
	// null: How many loans are missing a returned date?
	//   SELECT COUNT(*) FROM loans WHERE returned_on IS NULL
	//   The returned date is missing for 5 loans.
	// date: List the ids of the members whose joined date falls in March 2023.
	//   SELECT id FROM members WHERE joined_on >= '2023-03-01' AND joined_on < '2023-04-01'
	//   In March 2023: id 15.
	// empty: List the ids of the loans of the book whose title is 'The Harbor Letters'.
	//   SELECT l.id FROM loans AS l JOIN books AS b ON b.id = l.book_id WHERE b.title = 'The Harbor Letters'
	//   There are no loans for The Harbor Letters.
	// case-variants: Count the books whose genre is FICTION, however it was typed.
	//   SELECT COUNT(*) FROM books WHERE LOWER(TRIM(genre)) = 'fiction'
	//   (no golden: an edge case)
	// empty-first: Which books have author J. SARAMAGO? Give their ids.
	//   SELECT id FROM books WHERE LOWER(TRIM(author)) = 'j. saramago'
	//   (no golden: an edge case)
	// nulls: Count the members whose city is not 'Coimbra', including the ones where it is missing.
	//   SELECT COUNT(*) FROM members WHERE city IS NULL OR city <> 'Coimbra'
	//   (no golden: an edge case)
	// renamed-column: How many books have a category of 'history'?
	//   SELECT COUNT(*) FROM books WHERE LOWER(TRIM(genre)) = 'history'
	//   (no golden: an edge case)
	// look-alike-column: Count the members joined in 2021.
	//   SELECT COUNT(*) FROM members WHERE joined_on >= '2021-01-01' AND joined_on < '2022-01-01'
	//   (no golden: an edge case)
	// sql-error: How many patrons are in the database?
	//   SELECT COUNT(*) FROM members
	//   (no golden: an edge case)
	// count: Find the lowest published year recorded for the books.
	//   SELECT MIN(published_year) FROM books
	//   1951 is the lowest published year among the books.
}
