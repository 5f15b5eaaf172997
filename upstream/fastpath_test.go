package upstream

import (
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The direct forms of text blocks must be exactly what the JSON round trip
// makes of them, in both directions.
func TestTextBlocksMatchTheWirePath(t *testing.T) {
	blocks := []mcp.Content{
		&mcp.TextContent{Text: "plain"},
		&mcp.TextContent{Text: ""},
		&mcp.TextContent{Text: `<b>"quoted" & escaped</b> ✓`},
		&mcp.TextContent{Text: "bad \xff utf-8"},
		&mcp.TextContent{Text: "annotated", Annotations: &mcp.Annotations{Priority: 0.5}},
		&mcp.TextContent{Text: "meta", Meta: mcp.Meta{"k": "v"}},
		&mcp.ImageContent{Data: []byte("png"), MIMEType: "image/png"},
	}
	for _, b := range blocks {
		got, err := plainContent(b)
		if err != nil {
			t.Fatal(err)
		}
		want, err := plain(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%#v: direct %#v, wire %#v", b, got, want)
		}
		data := map[string]any{"content": []any{got}}
		fast, _, ok := Content(data)
		slow, _, ok2 := contentFromWire(data)
		if !ok || !ok2 || !reflect.DeepEqual(fast, slow) {
			t.Errorf("%#v: Content %#v (%v), wire %#v (%v)", b, fast, ok, slow, ok2)
		}
	}
	// A block's _meta and annotations survive the wire path.
	got, _, ok := contentFromWire(map[string]any{"content": []any{map[string]any{
		"type": "text", "text": "hi", "_meta": map[string]any{"k": "v"}, "annotations": map[string]any{"priority": 0.5},
	}}})
	if tc, isText := got[0].(*mcp.TextContent); !ok || !isText || tc.Text != "hi" || tc.Meta["k"] != "v" || tc.Annotations == nil || tc.Annotations.Priority != 0.5 {
		t.Errorf("a block with _meta and annotations read back as %#v", got)
	}
	// A marker the boundary put in place of a block is not content.
	if _, _, ok := Content(map[string]any{"content": []any{map[string]any{"truncated": true}}}); ok {
		t.Error("a marker read as content")
	}
}
