package mcpserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// parseCallAsMaps is parseCall as it was written before the walk over the
// body's own bytes: both objects decoded into maps of raw messages by
// encoding/json. parseCall must read every body the way it does.
func parseCallAsMaps(body []byte) (toolCall, bool) {
	if firstByte(body) != '{' {
		return toolCall{}, false
	}
	str := func(raw json.RawMessage, want string) bool {
		var s string
		return firstByte(raw) == '"' && json.Unmarshal(raw, &s) == nil && s == want
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil || !str(msg["jsonrpc"], "2.0") || !str(msg["method"], "tools/call") || !validID(msg["id"]) {
		return toolCall{}, false
	}
	raw := msg["params"]
	if firstByte(raw) != '{' {
		return toolCall{}, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(raw, &params) != nil {
		return toolCall{}, false
	}
	c := toolCall{id: msg["id"], arguments: params["arguments"]}
	if json.Unmarshal(params["name"], &c.name) != nil || firstByte(params["name"]) != '"' {
		return toolCall{}, false
	}
	if m, ok := params["_meta"]; ok && !bytes.Equal(bytes.TrimSpace(m), []byte("null")) {
		if json.Unmarshal(m, &c.meta) != nil {
			return toolCall{}, false
		}
		if _, stateless := c.meta["io.modelcontextprotocol/protocolVersion"]; stateless {
			return toolCall{}, false
		}
		_, c.progress = c.meta[progressToken]
	}
	if t, ok := params["task"]; ok {
		if firstByte(t) != '{' {
			return toolCall{}, false
		}
		c.task = true
	}
	return c, true
}

// parseSeeds are bodies that tell the two readings apart if they differ:
// escapes in names and values, repeated members, space everywhere JSON
// allows it, nesting with brackets inside strings, invalid UTF-8, names
// that differ only in case, and broken JSON.
var parseSeeds = []string{
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"crm_lookup","arguments":{"id":"c-1"}}}`,
	` { "jsonrpc" : "2.0" , "id" : "a\"b" , "method" : "tools/call" , "params" : { "name" : "x" , "arguments" : [ 1 , { "}" : "]" } ] } } `,
	`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"n\u0061me":"d\u00e9j\u00e0","arguments":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"a","name":"b"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"params":null}`,
	`{"jsonrpc":"2.0","id":1,"METHOD":"tools/call","params":{"name":"a"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"a"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a\xff"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":3}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":null,"task":{"ttl":1}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"x"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","task":true}}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"a"}}`,
	`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"a"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":null}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}} x`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}`,
	`{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"a","arguments":"\u0000"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"k":true,"l":false,"m":-1.5e3}}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`,
	`{}`, `{`, ``, `null`,
}

func TestParseCallReadsAsMapsDo(t *testing.T) {
	t.Parallel()
	for _, body := range parseSeeds {
		got, gotOK := parseCall([]byte(body))
		want, wantOK := parseCallAsMaps([]byte(body))
		if gotOK != wantOK || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: parseCall answered %+v %v, the maps' reading %+v %v", body, got, gotOK, want, wantOK)
		}
	}
}

func FuzzParseCallReadsAsMapsDo(f *testing.F) {
	for _, body := range parseSeeds {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got, gotOK := parseCall([]byte(body))
		want, wantOK := parseCallAsMaps([]byte(body))
		if gotOK != wantOK || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: parseCall answered %+v %v, the maps' reading %+v %v", body, got, gotOK, want, wantOK)
		}
	})
}
