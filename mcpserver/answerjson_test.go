package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/boundary"
)

// sdkAnswer is a tools/call answer as the fast path wrote it before it
// wrote one itself: the response encoded through the SDK's MarshalJSON
// methods, without the newline.
func sdkAnswer(t *testing.T, id json.RawMessage, res *mcp.CallToolResult) string {
	t.Helper()
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
	}{"2.0", id, res})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// unencodable is a value encoding/json refuses.
type unencodable struct{}

func (unencodable) MarshalJSON() ([]byte, error) { return nil, errors.New("no") }

// TestCallAnswerEncodedAsTheSDKDoes holds writeRPC's one-pass answer to
// the bytes the SDK's own encoding gives, for every member a result the
// fast path answers can carry, and with what needs escaping or compacting
// in each.
func TestCallAnswerEncodedAsTheSDKDoes(t *testing.T) {
	tricky := "<b>a & b</b> \u2028 \u2029 \"quoted\" \\ \n\t é \x01"
	prio := 0.5
	tests := []struct {
		name string
		id   string
		res  *mcp.CallToolResult
	}{
		{"empty content", `7`, &mcp.CallToolResult{Content: []mcp.Content{}}},
		{"nil content", `7`, &mcp.CallToolResult{}},
		{"text", `"tp-1"`, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tricky}}}},
		{"string id with html", `"<a>&"`, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x"}}}},
		{"negative id", `-12`, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: ""}}}},
		{"error", `1`, &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "refused"}}}},
		{"meta", `1`, &mcp.CallToolResult{Meta: mcp.Meta{"z": 1, "a": "<x>", "toolplane/untrusted": true},
			Content: []mcp.Content{&mcp.TextContent{Text: "x"}}}},
		{"empty meta", `1`, &mcp.CallToolResult{Meta: mcp.Meta{}, Content: []mcp.Content{&mcp.TextContent{Text: "x"}}}},
		{"structured raw, not compact", `1`, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x"}},
			StructuredContent: json.RawMessage("{ \"b\" : [1, 2,\n3], \"a\": \"<&>\u2028\" }")}},
		{"structured raw nil", `1`, &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: json.RawMessage(nil)}},
		{"structured map", `1`, &mcp.CallToolResult{Content: []mcp.Content{},
			StructuredContent: map[string]any{"y": []any{1.5, "<", nil}, "x": map[string]any{"k": true}}}},
		{"structured scalar", `1`, &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: "s"}},
		{"text with meta and annotations", `1`, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tricky,
			Meta: mcp.Meta{"k": "<v>"}, Annotations: &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: prio}}}}},
		{"text with empty meta", `1`, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x", Meta: mcp.Meta{}}}}},
		{"other blocks", `1`, &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "a"},
			&mcp.ImageContent{Data: []byte("png"), MIMEType: "image/png"},
			&mcp.AudioContent{Data: []byte("wav"), MIMEType: "audio/wav", Meta: mcp.Meta{"k": 1}},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a", Text: "<t>"}},
			&mcp.ResourceLink{URI: "file:///b", Name: "b"},
		}}},
		{"all at once", `"s"`, &mcp.CallToolResult{Meta: mcp.Meta{"m": []any{"<"}}, IsError: true,
			Content:           []mcp.Content{&mcp.TextContent{Text: tricky}, &mcp.TextContent{Text: "two"}},
			StructuredContent: json.RawMessage(`{"a" :1}`)}},
		{"encoded by the boundary", `1`, &mcp.CallToolResult{Content: []mcp.Content{},
			StructuredContent: encodedJSON(boundary.Encode(nil, map[string]any{"b": []any{1.5, "é", nil, true}, "a": map[string]any{"k": "\"q\" \\ \n"}}))}},
		{"encoded by the boundary, with what HTML escaping changes", `1`, &mcp.CallToolResult{Content: []mcp.Content{},
			StructuredContent: encodedJSON(boundary.Encode(nil, map[string]any{"a": "<b> & \u2028 \u2029"}))}},
		{"encoded by the boundary, none", `1`, &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: encodedJSON(nil)}},
		{"input required, left to the SDK's encoding", `1`, &mcp.CallToolResult{Content: []mcp.Content{}, RequestState: "st<"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := sdkAnswer(t, json.RawMessage(tt.id), tt.res)
			w := httptest.NewRecorder()
			writeRPC(w, json.RawMessage(tt.id), tt.res, nil)
			if got := w.Body.String(); got != want {
				t.Errorf("answer\n got %s\nwant %s", got, want)
			}
		})
	}

	t.Run("unencodable", func(t *testing.T) {
		w := httptest.NewRecorder()
		writeRPC(w, json.RawMessage(`3`), &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "partial"}},
			StructuredContent: unencodable{}}, nil)
		const want = `{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"the result could not be encoded"}}`
		if got := w.Body.String(); got != want {
			t.Errorf("answer\n got %s\nwant %s", got, want)
		}
	})
}

// TestCallAnswerKnowsTheSDKsMembers fails when the SDK's CallToolResult or
// TextContent gains or loses a member, which encodeCallAnswer would then
// write differently from the SDK: it must learn the member first.
func TestCallAnswerKnowsTheSDKsMembers(t *testing.T) {
	fields := func(typ reflect.Type) []string {
		var out []string
		for f := range typ.Fields() {
			out = append(out, f.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, tt := range []struct {
		typ  reflect.Type
		want string
	}{
		{reflect.TypeFor[mcp.CallToolResult](), "Content,InputRequests,IsError,Meta,RequestState,StructuredContent,err,resultType"},
		{reflect.TypeFor[mcp.TextContent](), "Annotations,Meta,Text"},
	} {
		if got := strings.Join(fields(tt.typ), ","); got != tt.want {
			t.Errorf("%s has members %s, encodeCallAnswer knows %s", tt.typ, got, tt.want)
		}
	}
	if resultTypeIndex == nil {
		t.Error("CallToolResult's result type not found: every answer takes the SDK's encoding")
	}
	// encodeCallAnswer writes a Meta as the map it is: a Meta that came
	// to encode itself would be skipped.
	if _, ok := any(mcp.Meta{}).(json.Marshaler); ok {
		t.Error("mcp.Meta has a MarshalJSON method: encodeCallAnswer writes it as a plain map")
	}
	if _, ok := any(&mcp.Meta{}).(json.Marshaler); ok {
		t.Error("*mcp.Meta has a MarshalJSON method: encodeCallAnswer writes it as a plain map")
	}
}

// BenchmarkCallAnswer writes one tools/call answer of the demo's ticket
// search (one or five tickets, as text and as structured content): "sdk"
// through the SDK's MarshalJSON methods, as writeRPC did before
// encodeCallAnswer, "one pass" as writeRPC does now.
func BenchmarkCallAnswer(b *testing.B) {
	for _, n := range []int{1, 5} {
		var tickets []any
		for i := range n {
			tickets = append(tickets, map[string]any{"id": fmt.Sprintf("t-%d", i), "subject": "Screen cracked after the update, again",
				"customer": "Ada Lovelace", "status": "open", "priority": "high", "created_at": "2026-12-06T10:00:00Z"})
		}
		data := map[string]any{"tickets": tickets, "total": n}
		render := func() *mcp.CallToolResult {
			enc := boundary.Encode(nil, data)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"ok":true,"data":` + string(enc) + `}`}},
				StructuredContent: encodedJSON(enc)}
		}
		id := json.RawMessage(`7`)
		b.Run(fmt.Sprintf("tickets=%d/sdk", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res := render()
				buf := rpcBufs.Get().(*bytes.Buffer)
				buf.Reset()
				_ = json.NewEncoder(buf).Encode(struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
					Result  any             `json:"result,omitempty"`
					Error   *rpcError       `json:"error,omitempty"`
				}{"2.0", id, res, nil})
				putRPCBuf(buf)
			}
		})
		b.Run(fmt.Sprintf("tickets=%d/one_pass", n), func(b *testing.B) {
			b.ReportAllocs()
			w := httptest.NewRecorder()
			for b.Loop() {
				w.Body.Reset()
				writeRPC(w, id, render(), nil)
			}
		})
	}
}
