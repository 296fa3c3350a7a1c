// Package task defines the task and fixture formats mcprl trains and
// evaluates on, and loads them from JSONL files and fixture directories.
package task
