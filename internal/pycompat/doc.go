// Package pycompat reproduces the parts of CPython 3.11 that the user's
// seed reward function (compute_mcp_reward) depends on, exactly: json.loads
// (the C scanner's grammar, NaN/Infinity, duplicate keys, lone surrogates,
// the 4300-digit integer limit, the recursion limit), str.strip() and
// str.lower() with their Unicode tables, read from CPython by gen_tables.py.
//
// Python strings are represented as Go strings in WTF-8: valid UTF-8, except
// that a lone surrogate (which Python's json.loads accepts from a \uD800
// escape) is encoded as its three-byte generalized UTF-8 form, so equality
// and substring tests on code points stay byte tests.
package pycompat
