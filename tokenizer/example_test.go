package tokenizer_test

import (
	"encoding/json"
	"fmt"
	"log"

	"github.com/mcprl/mcprl/chat"
	"github.com/mcprl/mcprl/tokenizer"
)

func ExampleTokenizer_Encode() {
	tok, err := tokenizer.Load("testdata/qwen2.5")
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.Encode("<|im_start|>user\nHow many singers?<|im_end|>")
	fmt.Println(ids)
	fmt.Printf("%q\n", tok.Decode(ids))
	fmt.Println("eos", tok.EOS(), "pad", tok.PadID(), "vocab", tok.VocabSize())
	// Output:
	// [151644 872 198 4340 1657 67041 30 151645]
	// "<|im_start|>user\nHow many singers?<|im_end|>"
	// eos 151645 pad 151643 vocab 151665
}

func ExampleTemplate_Render() {
	tok, err := tokenizer.Small() // same chat template as testdata/qwen2.5, quicker to load
	if err != nil {
		log.Fatal(err)
	}
	tmpl, err := tok.Template()
	if err != nil {
		log.Fatal(err)
	}
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "query_database",
		"parameters": {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}}}`)}
	msgs := []chat.Message{
		{Role: "system", Content: "You are an MCP agent."},
		{Role: "user", Content: "How many singers?"},
		{Role: "assistant", ToolCalls: []chat.Call{{Name: "query_database", Arguments: json.RawMessage(`{"sql": "SELECT COUNT(*) FROM singer"}`)}}},
		{Role: "tool", Content: "[[6]]"},
	}
	prompt, err := tmpl.Render(msgs, tools, true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(prompt)
	// Output:
	// <|im_start|>system
	// You are an MCP agent.
	//
	// # Tools
	//
	// You may call one or more functions to assist with the user query.
	//
	// You are provided with function signatures within <tools></tools> XML tags:
	// <tools>
	// {"type": "function", "function": {"name": "query_database", "parameters": {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}}}
	// </tools>
	//
	// For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
	// <tool_call>
	// {"name": <function-name>, "arguments": <args-json-object>}
	// </tool_call><|im_end|>
	// <|im_start|>user
	// How many singers?<|im_end|>
	// <|im_start|>assistant
	// <tool_call>
	// {"name": "query_database", "arguments": {"sql": "SELECT COUNT(*) FROM singer"}}
	// </tool_call><|im_end|>
	// <|im_start|>user
	// <tool_response>
	// [[6]]
	// </tool_response><|im_end|>
	// <|im_start|>assistant
}

func ExampleTokenizer_NewStreamDecoder() {
	tok, err := tokenizer.Small()
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.Encode("日本 ok")
	d := tok.NewStreamDecoder()
	for _, id := range ids {
		fmt.Printf("%d -> %q\n", id, d.Add(id))
	}
	fmt.Printf("flush -> %q\n", d.Flush())
	// Output:
	// 162 -> ""
	// 245 -> ""
	// 98 -> "日"
	// 162 -> ""
	// 250 -> ""
	// 105 -> "本"
	// 297 -> " o"
	// 74 -> "k"
	// flush -> ""
}

func ExampleSmall() {
	small, err := tokenizer.Small()
	if err != nil {
		log.Fatal(err)
	}
	sp := small.Specials()
	fmt.Println(small.VocabSize(), small.NumMerges(), sp.ImStart, sp.ImEnd, sp.ToolCallStart)
	fmt.Println(len(small.Encode("SELECT name FROM customers WHERE status = 'inactive'")))
	// Output:
	// 2048 1770 2027 2028 2040
	// 22
}
