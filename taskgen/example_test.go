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
	// count: What is the total number of books in the database?
	//   SELECT COUNT(*) FROM books
	//   26 books in total.
	// filter: What is the number of books with published year greater than 1989?
	//   SELECT COUNT(*) FROM books WHERE published_year > 1989
	//   8 books have a published year greater than 1989.
	// list: Which books have published year greater than 1968? Give their ids.
	//   SELECT id FROM books WHERE published_year > 1968
	//   Their ids are 2, 3, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 17, 20, 23, 24 and 26.
	// join: How many loans are there for the book with title 'The Harbor Atlas'?
	//   SELECT COUNT(*) FROM loans AS l JOIN books AS b ON b.id = l.book_id WHERE b.title = 'The Harbor Atlas'
	//   There are 3 loans for The Harbor Atlas.
	// null: For how many books is the genre known?
	//   SELECT COUNT(*) FROM books WHERE genre IS NOT NULL
	//   The genre is known for 24 books.
	// date: Which loans have a loaned date in September 2023? Give their ids.
	//   SELECT id FROM loans WHERE loaned_on >= '2023-09-01' AND loaned_on < '2023-10-01'
	//   In September 2023: id 42.
	// edge-case: Count the volumes whose author is W. Szymborska.
	//   SELECT COUNT(*) FROM books WHERE author = 'W. Szymborska'
	//   They are the rows of books: 3 have author 'W. Szymborska'.
	// empty: List the ids of the loans of the book whose title is 'The Paper Maps'.
	//   SELECT l.id FROM loans AS l JOIN books AS b ON b.id = l.book_id WHERE b.title = 'The Paper Maps'
	//   There are no loans for The Paper Maps.
}
