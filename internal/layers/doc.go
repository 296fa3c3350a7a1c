// Package layers holds no code, only the test that keeps the module's
// dependencies in layers: the data packages (conversations, tasks, tool
// calls, tokens, rewards, rollouts, task generation) never link the tensor
// engine (GoMLX), and the packages below the sandbox never link the MCP SDK.
// Only the model and what trains or evaluates it link GoMLX.
package layers
