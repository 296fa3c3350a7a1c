// Package toolcall parses tool calls out of model text in the Qwen/Hermes
// form <tool_call>{"name": ..., "arguments": {...}}</tool_call> and renders
// calls and tool catalogs back into text.
package toolcall
