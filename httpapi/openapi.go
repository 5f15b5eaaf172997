package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// withServer answers the OpenAPI document doc with its servers replaced by
// one, url. The embedded document names the default address so that it is
// valid on its own; the served copy names where this server is reached.
// Every other member is kept as written and in its order, so the served
// copy differs from the file in servers alone.
func withServer(doc []byte, url string) ([]byte, error) {
	servers, err := json.Marshal([]map[string]string{{"url": url, "description": "This server."}})
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var out bytes.Buffer
	out.WriteByte('{')
	replaced := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read a member name: %w", err)
		}
		name, _ := t.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, fmt.Errorf("read member %q: %w", name, err)
		}
		if name == "servers" {
			value, replaced = servers, true
		}
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		key, _ := json.Marshal(name)
		out.Write(key)
		out.WriteByte(':')
		out.Write(value)
	}
	if !replaced {
		// A document without servers gets one, after the members it has.
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		out.WriteString(`"servers":`)
		out.Write(servers)
	}
	out.WriteByte('}')
	// Indent like the file, so the served copy reads the same.
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, out.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	pretty.WriteByte('\n')
	return pretty.Bytes(), nil
}
