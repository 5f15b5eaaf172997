package discovery

import "encoding/json"

// The meta-tools an MCP session in meta-tool mode lists instead of every
// tool its key may call: find one by what it does, read its full
// declaration, call it. The third goes through the same invoker as a
// direct call, so it is decided, approved, replayed and refused alike.
const (
	FindTools    = "find_tools"
	DescribeTool = "describe_tool"
	CallTool     = "call_tool"
)

// MetaTool is the declaration of one meta-tool, the same through every
// door that shows them.
type MetaTool struct {
	Name        string
	Title       string
	Description string
	InputSchema json.RawMessage
	// ReadOnly says the meta-tool itself changes nothing (call_tool's
	// effect is the called tool's).
	ReadOnly bool
}

// MetaTools answers the three meta-tools' declarations, in the order a
// listing shows them. Their text is kept short on purpose: it is what a
// model reads up front in place of every tool's.
func MetaTools() []MetaTool {
	return []MetaTool{
		{
			Name:  FindTools,
			Title: "Find tools",
			Description: "Search the tools you may call by what you want done. Answers the best matches, each with its name, a one-line summary and what it depends on; " +
				"or says there is no good match. Then use describe_tool for a match's arguments and call_tool to call it.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"query":{"type":"string","description":"What you want to do, in your own words."},` +
				`"tags":{"type":"array","items":{"type":"string"},"description":"Only tools with every one of these tags."},` +
				`"limit":{"type":"integer","minimum":1,"maximum":20,"description":"At most this many matches (default 5)."}},` +
				`"required":["query"],"additionalProperties":false}`),
			ReadOnly: true,
		},
		{
			Name:        DescribeTool,
			Title:       "Describe a tool",
			Description: "Answer one tool's full declaration: its description, input schema and hints. Name it as find_tools named it.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"name":{"type":"string","description":"The tool's name."}},` +
				`"required":["name"],"additionalProperties":false}`),
			ReadOnly: true,
		},
		{
			Name:  CallTool,
			Title: "Call a tool",
			Description: "Call one tool with its arguments, as if it were listed: the same checks, approvals and answers. " +
				"Read its input schema with describe_tool first.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"name":{"type":"string","description":"The tool's name."},` +
				`"arguments":{"type":"object","description":"The tool's arguments, as its input schema says."}},` +
				`"required":["name","arguments"],"additionalProperties":false}`),
		},
	}
}
