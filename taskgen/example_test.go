package taskgen_test

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/mcprl/mcprl/task"
	"github.com/mcprl/mcprl/taskgen"
)

// Generate reads a fixture's live database and writes questions with SQL
// oracles and golden trajectories; the seed fixes the choice.
func ExampleGenerate() {
	fx, err := task.LoadFixture(filepath.Join("testdata", "library"))
	if err != nil {
		panic(err)
	}
	tasks, err := taskgen.Generate(context.Background(), fx, taskgen.Options{N: 8, Seed: 1})
	if err != nil {
		panic(err)
	}
	for _, t := range tasks {
		fmt.Printf("%s: %s\n  %s\n  %s\n", t.Category, t.Task, t.GroundTruthAssertions[0], t.Golden[len(t.Golden)-1].Content)
	}
	// Output:
	// count: What is the fewest pages any book has?
	//   SELECT MIN(pages) FROM books
	//   The book with the fewest pages has 101.
	// filter: How many books have more than 553 pages?
	//   SELECT COUNT(*) FROM books WHERE pages > 553
	//   There are 8 such books.
	// list: Which books have author 'C. Sagan'? Give their ids.
	//   SELECT id FROM books WHERE author = 'C. Sagan'
	//   The ids of the books with author 'C. Sagan' are 6, 7 and 9.
	// join: Count the loans of books with genre 'history'.
	//   SELECT COUNT(*) FROM loans AS l JOIN books AS b ON b.id = l.book_id WHERE LOWER(TRIM(b.genre)) = 'history'
	//   10 loans belong to books with genre 'history'.
	// null: Which books have no genre? Give their ids.
	//   SELECT id FROM books WHERE genre IS NULL
	//   2 books have no genre: ids 16 and 24.
	// date: List the ids of the members whose joined date falls in September 2023.
	//   SELECT id FROM members WHERE joined_on >= '2023-09-01' AND joined_on < '2023-10-01'
	//   1 member has a joined date in September 2023: id 20.
	// edge-case: Count the books whose genre is Science.
	//   SELECT COUNT(*) FROM books WHERE LOWER(TRIM(genre)) = 'science'
	//   The genre is written as 'SCIENCE' and 'science'; counting all of them, 8 books match.
	// empty: List the ids of the loans of the book whose title is 'The Paper Archive'.
	//   SELECT l.id FROM loans AS l JOIN books AS b ON b.id = l.book_id WHERE b.title = 'The Paper Archive'
	//   None: The Paper Archive has no loans (the query returns no rows).
}
