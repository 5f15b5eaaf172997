package projection

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/toolplane/toolplane"
)

// ContentSchema is the output schema the registry holds for a remote MCP
// tool that declares none of its own: its answer is its content blocks,
// and any structured content. It is toolplane's internal contract for
// validating and bounding such an answer, not the server's, so it is never
// shown (see OutputSchema).
const ContentSchema = `{"type":"object","properties":{"content":{"type":"array","items":{"type":"object"}},"structuredContent":{}},"required":["content"]}`

// ContentOutput reports whether d is a remote tool answering its MCP
// content blocks (it declares no output schema of its own).
func ContentOutput(d *toolplane.Definition) bool {
	return d.Kind == toolplane.KindMCP && d.Binding.Remote != nil && bytes.Equal(d.OutputSchema, []byte(ContentSchema))
}

// InputSchema answers d's input schema as a model is shown it (see Schema).
func InputSchema(d *toolplane.Definition) json.RawMessage { return Schema(d.InputSchema) }

// OutputSchema answers d's output schema as a client is shown it: none for
// a remote tool whose server declared none (ContentSchema is internal, and
// clients flag an invented schema), otherwise the declared one as Schema
// renders it.
func OutputSchema(d *toolplane.Definition) json.RawMessage {
	if ContentOutput(d) {
		return nil
	}
	return Schema(d.OutputSchema)
}

// Schema answers raw without vendor keywords: every "x-" keyword of the
// schema and its subschemas (x-coerce, say) is toolplane's or a server's
// instruction to its own validator, meaningless to a model and flagged by
// clients that check portability. Names of properties and definitions and
// the values of enum, const, default and examples are data, not keywords,
// and stay as they are. A schema without vendor keywords, or that is not
// JSON, is answered unchanged.
func Schema(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"x-`)) {
		return raw
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	v, changed := strip(v)
	if !changed {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

// Keywords whose value is a subschema, a list of subschemas, or a map of
// names to subschemas (draft 2020-12 and the older drafts servers state).
var (
	subschema = map[string]bool{
		"items": true, "additionalItems": true, "unevaluatedItems": true, "contains": true,
		"additionalProperties": true, "unevaluatedProperties": true, "propertyNames": true,
		"not": true, "if": true, "then": true, "else": true, "contentSchema": true,
	}
	subschemaList = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true, "items": true}
	subschemaMap  = map[string]bool{
		"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
		"dependentSchemas": true, "dependencies": true,
	}
)

// strip removes vendor keywords from the schema v, in place, reporting
// whether it removed any.
func strip(v any) (any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return v, false
	}
	changed := false
	for k, sub := range m {
		if strings.HasPrefix(k, "x-") {
			delete(m, k)
			changed = true
			continue
		}
		switch {
		case subschemaMap[k]:
			if names, ok := sub.(map[string]any); ok {
				for name, s := range names {
					var c bool
					names[name], c = strip(s)
					changed = changed || c
				}
			}
		case subschemaList[k] && isList(sub):
			for i, s := range sub.([]any) {
				var c bool
				sub.([]any)[i], c = strip(s)
				changed = changed || c
			}
		case subschema[k]:
			var c bool
			m[k], c = strip(sub)
			changed = changed || c
		}
	}
	return m, changed
}

func isList(v any) bool { _, ok := v.([]any); return ok }
