// Package jinja is a copy of github.com/ardanlabs/jinja v1.8.0 (Apache
// License 2.0, see LICENSE; Copyright 2026 Ardan Labs), a pure-Go Jinja
// engine for LLM chat templates, kept here so that rendering can be bounded:
// a chat template comes with a model's files, and upstream has no limits on
// what a template may compute. The changes to upstream are in limits.go and
// at the places it is called from (marked "mcprl:"); everything else is
// upstream's code and tests as released.
package jinja
