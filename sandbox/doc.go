// Package sandbox gives each trajectory its own live MCP tool server.
//
// A [Factory] is made once per fixture: it builds the fixture's database
// template once (package sqldb), opens the workspace for run_linter (package
// lint) and connects the fixture's external MCP servers. [Factory.Fork] then
// gives every trajectory a [Sandbox]: its own database fork and its own MCP
// server, reached through a real MCP client session over an in-memory
// transport (each JSON-RPC message crosses in its wire encoding;
// Options.SDKPipe uses the SDK's own net.Pipe transport instead), so a
// DELETE in one trajectory is never seen by another.
//
// Tools: query_database {sql}, run_linter {path}, and the tools of the
// external servers named in sandbox.yaml, which are proxied through each
// sandbox's server (their state is shared by all forks of a factory).
package sandbox
