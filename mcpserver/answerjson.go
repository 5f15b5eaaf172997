package mcpserver

import (
	"bytes"
	"encoding/json"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tools/call answer encoded through the SDK's MarshalJSON methods is
// encoded twice and compacted three times over: CallToolResult and
// TextContent each marshal a wire copy of themselves into a fresh slice,
// which the enclosing encoder scans again, byte by byte, to compact it.
// The text block (a whole answer as a JSON string) and the structured
// content are most of an answer's bytes, so that was most of the cost of
// writing it. encodeCallAnswer writes the same bytes in one pass: each
// value is encoded once, by the same encoder settings (HTML escaping on),
// into the answer's own buffer. Encoding a value alone or inside a struct
// gives the same bytes, and compacting what encoding/json wrote changes
// nothing, so the answer is byte for byte what the SDK's form would be
// (TestCallAnswerEncodedAsTheSDKDoes holds it).

// resultTypeIndex is where CallToolResult keeps its unexported result type
// (set by the SDK for an input-required answer), read to leave any result
// that carries one to the SDK's own encoding; nil if the SDK has no such
// field, which leaves every result to it.
var resultTypeIndex = func() []int {
	f, ok := reflect.TypeFor[mcp.CallToolResult]().FieldByName("resultType")
	if !ok || f.Type.Kind() != reflect.String {
		return nil
	}
	return f.Index
}()

// plainCallResult reports whether res is a result encodeCallAnswer writes:
// one without the input-required members (inputRequests, requestState,
// resultType), which the fast path's results never carry.
func plainCallResult(res *mcp.CallToolResult) bool {
	if res == nil || res.InputRequests != nil || res.RequestState != "" || resultTypeIndex == nil {
		return false
	}
	return reflect.ValueOf(res).Elem().FieldByIndex(resultTypeIndex).String() == ""
}

// encodeCallAnswer writes the JSON-RPC response with id answering res (a
// plainCallResult) into buf, through enc, an Encoder writing to buf. On an
// error buf holds part of an answer, which the caller discards.
func encodeCallAnswer(buf *bytes.Buffer, enc *json.Encoder, id json.RawMessage, res *mcp.CallToolResult) error {
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	if err := encodeValue(buf, enc, id); err != nil {
		return err
	}
	buf.WriteString(`,"result":{`)
	// The members in the order CallToolResult's wire form has them.
	if len(res.Meta) > 0 {
		buf.WriteString(`"_meta":`)
		if err := encodeValue(buf, enc, map[string]any(res.Meta)); err != nil {
			return err
		}
		buf.WriteByte(',')
	}
	buf.WriteString(`"content":`)
	if res.Content == nil {
		buf.WriteString("null")
	} else {
		buf.WriteByte('[')
		for i, c := range res.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeContent(buf, enc, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	}
	if res.StructuredContent != nil {
		buf.WriteString(`,"structuredContent":`)
		if raw, ok := res.StructuredContent.(encodedJSON); ok && len(raw) > 0 && !htmlEscaped(raw) {
			// Already in the form compacting it would give.
			buf.Write(raw)
		} else if err := encodeValue(buf, enc, res.StructuredContent); err != nil {
			return err
		}
	}
	if res.IsError {
		buf.WriteString(`,"isError":true`)
	}
	buf.WriteString("}}")
	return nil
}

// encodeContent writes one content block: a text block as TextContent's
// MarshalJSON writes it, any other by its own MarshalJSON.
func encodeContent(buf *bytes.Buffer, enc *json.Encoder, c mcp.Content) error {
	t, ok := c.(*mcp.TextContent)
	if !ok || t == nil {
		return encodeValue(buf, enc, c)
	}
	buf.WriteString(`{"type":"text","text":`)
	if err := encodeValue(buf, enc, t.Text); err != nil {
		return err
	}
	if len(t.Meta) > 0 {
		buf.WriteString(`,"_meta":`)
		if err := encodeValue(buf, enc, map[string]any(t.Meta)); err != nil {
			return err
		}
	}
	if t.Annotations != nil {
		buf.WriteString(`,"annotations":`)
		if err := encodeValue(buf, enc, t.Annotations); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}

// encodeValue writes v's JSON into buf through enc, without the newline
// an Encoder ends each value with.
func encodeValue(buf *bytes.Buffer, enc *json.Encoder, v any) error {
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1)
	return nil
}

// encodedJSON is JSON boundary.Encode wrote of a result boundary.Apply
// bounded: valid, compact, no deeper than the boundary's limit, and
// nothing in it HTML-escaped. Encoded as a json.RawMessage is (compacted,
// with HTML escaping), its bytes are the same unless they hold what HTML
// escaping changes, so the answer copies them as they are when they do
// not, instead of scanning them once more. Make one of nothing else:
// unbounded JSON copied as is could pass encoding/json's depth limit,
// which the scan would have refused.
type encodedJSON []byte

// MarshalJSON answers e itself, or null for none, as json.RawMessage does.
func (e encodedJSON) MarshalJSON() ([]byte, error) {
	if e == nil {
		return []byte("null"), nil
	}
	return e, nil
}

// htmlEscaped reports whether encoding/json's HTML escaping would change
// b: whether it holds <, > or &, or U+2028 or U+2029 (both begin with the
// byte 0xE2, taken as a sign of either).
func htmlEscaped(b []byte) bool {
	for _, c := range b {
		switch c {
		case '<', '>', '&', 0xE2:
			return true
		}
	}
	return false
}
