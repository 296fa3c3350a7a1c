// Package taskgen writes training tasks for any fixture by reading its
// live database: the tables, columns, foreign keys and value distributions
// it finds through package sqldb, and the workspace files the linter
// checks, become questions with ground_truth_assertions (SQL oracles in
// package reward's sense, or expressions over the trajectory's facts).
//
// Ordinary tasks (counts, filters, lists, joins, NULL checks, dates, empty
// results, a file that lints clean) carry a golden trajectory: the one
// happy-path tool call, its observation recorded from the same database,
// and an answer that states the result. Edge-case tasks (values whose case
// or spacing varies, NULLs, renamed and look-alike columns, a first query
// that comes back empty, SQL errors, a linter that fails first) carry no
// golden: only the assertions a verifier checks. Each edge case was checked
// to trap the natural first attempt (the query an ordinary task's golden
// would write errors, comes back empty, or returns the wrong rows).
package taskgen
