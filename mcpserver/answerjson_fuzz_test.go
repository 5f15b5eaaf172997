package mcpserver

import (
	"encoding/json"
	"math"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/boundary"
)

// fuzzInput draws the parts of a tools/call answer from a fuzzer's bytes,
// a byte at a time, answering zero values once they run out.
type fuzzInput struct {
	b []byte
	i int
}

// byte answers the next byte, or 0 past the end.
func (f *fuzzInput) byte() byte {
	if f.i >= len(f.b) {
		return 0
	}
	c := f.b[f.i]
	f.i++
	return c
}

// str answers the next few bytes as a string, valid UTF-8 or not.
func (f *fuzzInput) str() string {
	n := int(f.byte() % 12)
	if f.i+n > len(f.b) {
		n = len(f.b) - f.i
	}
	s := string(f.b[f.i : f.i+n])
	f.i += n
	return s
}

// val answers a JSON-like value: scalars, numbers of every size, raw
// messages valid or not, arrays and objects up to depth 4.
func (f *fuzzInput) val(depth int) any {
	switch f.byte() % 10 {
	case 0:
		return nil
	case 1:
		return f.byte()%2 == 0
	case 2:
		return f.str()
	case 3:
		return float64(int8(f.byte())) * math.Pow(10, float64(int8(f.byte())%40))
	case 4:
		return json.Number(f.str())
	case 5:
		if depth > 3 {
			return "x"
		}
		n := int(f.byte() % 4)
		a := []any{}
		for range n {
			a = append(a, f.val(depth+1))
		}
		return a
	case 6:
		if depth > 3 {
			return 1.0
		}
		n := int(f.byte() % 4)
		m := map[string]any{}
		for range n {
			m[f.str()] = f.val(depth + 1)
		}
		return m
	case 7:
		return json.RawMessage(f.str())
	case 8:
		return int64(f.byte()) << 50
	default:
		return []string{"<&>", "\u2028"}
	}
}

// meta answers a result's or a block's _meta: nil, empty or filled.
func (f *fuzzInput) meta() mcp.Meta {
	switch f.byte() % 3 {
	case 0:
		return nil
	case 1:
		return mcp.Meta{}
	}
	m := mcp.Meta{}
	for range int(f.byte()%3) + 1 {
		m[f.str()] = f.val(1)
	}
	return m
}

// ann answers a content block's annotations, or none.
func (f *fuzzInput) ann() *mcp.Annotations {
	if f.byte()%2 == 0 {
		return nil
	}
	return &mcp.Annotations{Audience: []mcp.Role{mcp.Role(f.str())}, Priority: float64(f.byte()) / 7, LastModified: f.str()}
}

// content answers a content block of any kind the SDK has, or none.
func (f *fuzzInput) content() mcp.Content {
	switch f.byte() % 9 {
	case 0:
		return nil
	case 1:
		return &mcp.TextContent{Text: "\x00\u2029<"}
	case 2:
		return &mcp.ImageContent{Data: []byte(f.str()), MIMEType: f.str(), Meta: f.meta(), Annotations: f.ann()}
	case 3:
		return &mcp.AudioContent{Data: []byte(f.str()), MIMEType: f.str(), Meta: f.meta(), Annotations: f.ann()}
	case 4:
		return &mcp.ResourceLink{URI: f.str(), Name: f.str(), Meta: f.meta(), Annotations: f.ann()}
	case 5:
		return &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: f.str(), Text: f.str()}, Meta: f.meta(), Annotations: f.ann()}
	default:
		return &mcp.TextContent{Text: f.str(), Meta: f.meta(), Annotations: f.ann()}
	}
}

// FuzzCallAnswerEncodedAsTheSDKDoes: whatever the result (every content
// kind, metadata, structured content of every form, any request id), the
// answer writeRPC writes is byte for byte the one encoding/json writes of
// the SDK's result in the JSON-RPC envelope, as writeRPC did before
// encodeCallAnswer, its failure answer included.
func FuzzCallAnswerEncodedAsTheSDKDoes(F *testing.F) {
	F.Add([]byte("\x06\x03abc<>&\xe2\x80\xa8\xff\x00"), []byte("{}"))
	F.Add([]byte{5, 5, 5, 5, 6, 6, 2, 3, 'a', 0xff, '<'}, []byte(`"x"`))
	F.Fuzz(func(t *testing.T, b []byte, idb []byte) {
		f := &fuzzInput{b: b}
		res := &mcp.CallToolResult{Meta: f.meta(), IsError: f.byte()%2 == 1}
		switch f.byte() % 3 {
		case 0:
		case 1:
			res.Content = []mcp.Content{}
		default:
			for range int(f.byte()%4) + 1 {
				res.Content = append(res.Content, f.content())
			}
		}
		switch f.byte() % 5 {
		case 0:
		case 1:
			res.StructuredContent = encodedJSON(boundary.Encode(nil, f.val(0)))
		case 2:
			res.StructuredContent = json.RawMessage(f.str())
		case 3:
			res.StructuredContent = f.val(0)
		case 4:
			res.StructuredContent = encodedJSON(nil)
		}
		id := json.RawMessage(idb)
		if len(idb) == 0 {
			id = nil
		}
		old, oerr := json.Marshal(rpcResponse{"2.0", id, res, nil})
		if oerr != nil {
			old, _ = json.Marshal(rpcUnencodable(id))
		}
		w := httptest.NewRecorder()
		writeRPC(w, id, res, nil)
		if got := w.Body.String(); got != string(old) {
			t.Fatalf("the answer differs from the SDK's encoding:\n got %q\nwant %q", got, old)
		}
	})
}
