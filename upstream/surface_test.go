package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/fencetest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/upstream"
)

// pixel is a 1x1 PNG.
var pixel = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 0x0d, 'I', 'H', 'D', 'R', 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89}

// mediaUpstream is an MCP server on loopback whose tools answer an image
// beside text, take a vendor keyword in their input schema, and declare an
// output schema or none.
func mediaUpstream(t *testing.T) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "media", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "picture", Description: "Draw a picture.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"size":{"type":"integer","x-coerce":true,"x-vendor-hint":"px"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "here it is"},
				&mcp.ImageContent{Data: pixel, MIMEType: "image/png"},
				&mcp.ResourceLink{URI: "file:///pic.png", Name: "pic.png"},
			}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "measure", Description: "Measure.",
		InputSchema:  json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"width":{"type":"integer"}},"x-unit":"px"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"width":3}`}}, StructuredContent: map[string]any{"width": 3}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "post", Description: "Post a message.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"api_key":{"type":"string"},"body":{"type":"string"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "posted"}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}

func mediaEnv(t *testing.T) *env {
	read := upstream.Relax{Effect: toolplane.EffectRead, RequiresApproval: no()}
	return newEnv(t, nil, upstream.Config{Slug: "media", URL: mediaUpstream(t),
		Tools: map[string]upstream.Relax{"picture": read, "measure": read}})
}

// mediaDoors are the two MCP endpoints a remote tool is served on, with
// the name it has on each.
func mediaDoors(e *env) []struct {
	door string
	h    http.Handler
	name func(string) string
} {
	return []struct {
		door string
		h    http.Handler
		name func(string) string
	}{
		{"/mcp", e.mcp.Handler(), func(n string) string { return "mcp_media_" + n }},
		{"/mcp/media", e.mcp.UpstreamHandler("media"), func(n string) string { return n }},
	}
}

func TestUpstreamToolsListShowsTheServersSchemasWithoutVendorKeywords(t *testing.T) {
	e := mediaEnv(t)
	for _, d := range mediaDoors(e) {
		t.Run(d.door, func(t *testing.T) {
			cs := e.clientFor(t, d.h, nil)
			tools := map[string]*mcp.Tool{}
			for tool, err := range cs.Tools(e.ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				tools[tool.Name] = tool
			}
			pic, measure := tools[d.name("picture")], tools[d.name("measure")]
			if pic == nil || measure == nil {
				t.Fatalf("tools/list: %v", tools)
			}
			if pic.OutputSchema != nil {
				t.Errorf("a tool whose server declared no output schema is shown one: %v", pic.OutputSchema)
			}
			if measure.OutputSchema == nil {
				t.Errorf("the server's own output schema is not shown")
			}
			for _, tool := range []*mcp.Tool{pic, measure} {
				b, _ := json.Marshal(tool)
				if bytes.Contains(b, []byte(`"x-`)) {
					t.Errorf("%s is shown vendor keywords: %s", tool.Name, b)
				}
			}
		})
	}
	t.Run("GET /v1/tools", func(t *testing.T) {
		quiet := slog.New(slog.DiscardHandler)
		layer := &door.Door{Invoker: e.iv, Registry: e.reg, Store: e.store, Log: quiet}
		api := httptest.NewServer((&httpapi.Server{Door: layer, Store: e.store, Log: quiet}).Handler())
		t.Cleanup(api.Close)
		req, _ := http.NewRequest("GET", api.URL+"/v1/tools", nil)
		req.Header.Set("Authorization", "Bearer "+e.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Items []struct {
				Name         string          `json:"name"`
				InputSchema  json.RawMessage `json:"input_schema"`
				OutputSchema json.RawMessage `json:"output_schema"`
			} `json:"items"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/tools: %d %v", resp.StatusCode, err)
		}
		seen := 0
		for _, it := range body.Items {
			switch it.Name {
			case "mcp.media.picture":
				seen++
				if string(it.OutputSchema) != "null" {
					t.Errorf("picture is shown an output schema: %s", it.OutputSchema)
				}
			case "mcp.media.measure":
				seen++
			default:
				continue
			}
			if bytes.Contains(it.InputSchema, []byte(`"x-`)) || bytes.Contains(it.OutputSchema, []byte(`"x-`)) {
				t.Errorf("%s is shown vendor keywords: %s %s", it.Name, it.InputSchema, it.OutputSchema)
			}
		}
		if seen != 2 {
			t.Errorf("GET /v1/tools listed %d of the server's tools", seen)
		}
	})
	// The registry keeps what it validates with.
	if tool, ok := e.reg.Get("", "mcp.media.picture"); !ok || !strings.Contains(string(tool.Def.InputSchema), "x-coerce") {
		t.Errorf("the registry lost the input schema's x-coerce: %v", ok)
	}
}

func TestUpstreamContentBlocksPassThroughOnEveryDoor(t *testing.T) {
	e := mediaEnv(t)
	call := func(t *testing.T, h http.Handler, name string) *mcp.CallToolResult {
		t.Helper()
		cs := e.clientFor(t, h, nil)
		res, err := cs.CallTool(e.ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"size": 1}})
		if err != nil || res.IsError {
			t.Fatalf("picture: %v %v", text(res), err)
		}
		if res.Meta["toolplane/untrusted"] != true {
			t.Errorf("the answer is not labelled untrusted: %v", res.Meta)
		}
		return res
	}
	isPixel := func(t *testing.T, c mcp.Content) {
		t.Helper()
		if img, ok := c.(*mcp.ImageContent); !ok || !bytes.Equal(img.Data, pixel) || img.MIMEType != "image/png" {
			t.Errorf("not the server's image: %#v", c)
		}
	}
	t.Run("/mcp", func(t *testing.T) {
		// The envelope the model reads, then the image as a block of its
		// own; the envelope says where it went, without its bytes.
		res := call(t, e.mcp.Handler(), "mcp_media_picture")
		if len(res.Content) != 2 {
			t.Fatalf("want the envelope and the image, got %d blocks: %s", len(res.Content), text(res))
		}
		env, ok := res.Content[0].(*mcp.TextContent)
		if !ok {
			t.Fatalf("block 0 is %T", res.Content[0])
		}
		var body struct {
			OK   bool `json:"ok"`
			Data struct {
				Content []map[string]any `json:"content"`
			} `json:"data"`
			Meta struct {
				Untrusted bool `json:"untrusted"`
			} `json:"meta"`
		}
		if err := json.Unmarshal([]byte(env.Text), &body); err != nil || !body.OK || !body.Meta.Untrusted || len(body.Data.Content) != 3 {
			t.Fatalf("envelope %s: %v", env.Text, err)
		}
		if c := body.Data.Content; c[0]["text"] != "here it is" || c[1]["type"] != "image" || c[1]["content_block"] != float64(1) || c[2]["uri"] != "file:///pic.png" {
			t.Errorf("envelope content %v", c)
		}
		if strings.Contains(env.Text, `"data":"iVBOR`) || bytes.Contains(mustJSON(t, res.StructuredContent), []byte("iVBOR")) {
			t.Errorf("the image is still base64 inside the JSON: %s", env.Text)
		}
		isPixel(t, res.Content[1])
	})
	t.Run("/mcp/media", func(t *testing.T) {
		// The server's own blocks, its text fenced.
		res := call(t, e.mcp.UpstreamHandler("media"), "picture")
		if len(res.Content) != 3 {
			t.Fatalf("want the server's 3 blocks, got %d: %s", len(res.Content), text(res))
		}
		if tc, ok := res.Content[0].(*mcp.TextContent); !ok {
			t.Errorf("block 0 is %T", res.Content[0])
		} else if _, inner, fenced := fencetest.Unfence(tc.Text); !fenced || inner != "here it is" {
			t.Errorf("the server's text is not fenced: %q", tc.Text)
		}
		isPixel(t, res.Content[1])
		if link, ok := res.Content[2].(*mcp.ResourceLink); !ok || link.URI != "file:///pic.png" {
			t.Errorf("block 2 is not the server's link: %#v", res.Content[2])
		}
		// A tool with an output schema: its structured content, and that
		// JSON as its text block, fenced; not toolplane's envelope.
		cs := e.clientFor(t, e.mcp.UpstreamHandler("media"), nil)
		res, err := cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "measure", Arguments: map[string]any{}})
		if err != nil || res.IsError || len(res.Content) != 1 {
			t.Fatalf("measure: %v %v", text(res), err)
		}
		if tc, ok := res.Content[0].(*mcp.TextContent); !ok {
			t.Errorf("block 0 is %T", res.Content[0])
		} else if _, inner, fenced := fencetest.Unfence(tc.Text); !fenced || inner != `{"width":3}` {
			t.Errorf("measure's text: %q", tc.Text)
		}
		if got := string(mustJSON(t, res.StructuredContent)); got != `{"width":3}` || res.Meta["toolplane/untrusted"] != true {
			t.Errorf("measure: structured %s, meta %v", got, res.Meta)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestUpstreamApprovalHasAPreview(t *testing.T) {
	e := mediaEnv(t)
	in := e.inv("run-preview")
	in.Principal.Tools = []string{"mcp.media.post"}
	long := strings.Repeat("é", 400)
	tests := []struct {
		name, args string
		want       []string
		wantNot    []string
	}{
		{"arguments rendered, a credential redacted", `{"to":"ada","api_key":"sk-live-123456","body":"hi"}`,
			[]string{"post ", `"to":"ada"`, `"body":"hi"`, `"api_key":"[redacted]"`}, []string{"sk-live-123456"}},
		{"bounded", `{"to":"bob","body":"` + long + `"}`, []string{"post ", `{"body":"éé`, "…"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.iv.InvokeJSON(e.ctx, "mcp.media.post", json.RawMessage(tt.args), in)
			var ar *invoke.ApprovalRequired
			if !errors.As(err, &ar) {
				t.Fatalf("want approval required, got %v", err)
			}
			a, err := e.store.GetApproval(e.ctx, "org-1", ar.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{ar.Preview, a.Preview} {
				for _, w := range tt.want {
					if !strings.Contains(p, w) {
						t.Errorf("preview %q lacks %s", p, w)
					}
				}
				for _, w := range tt.wantNot {
					if strings.Contains(p, w) {
						t.Errorf("preview %q shows %s", p, w)
					}
				}
				if len(p) > 512 || strings.ContainsAny(p, "\n\r") {
					t.Errorf("preview is not one bounded line: %d bytes", len(p))
				}
			}
		})
	}
}
