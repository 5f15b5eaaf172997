package rego

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// inputSchema is the JSON Schema of the Request document as rules read it
// (input). Every object is closed, so the type checker refuses a reference
// to an attribute the Request does not have; the open parts (arguments,
// facts, attributes) are objects of anything unless the bundle's
// schema.json narrows them.
const inputSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "principal": {
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "agent": {"type": "string"},
        "key": {"type": "string"},
        "roles": {"type": "array", "items": {"type": "string"}},
        "team": {"type": "string"},
        "tenant": {"type": "string"},
        "attributes": @agent_attributes@
      }
    },
    "user": {
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "id": {"type": "string"},
        "roles": {"type": "array", "items": {"type": "string"}},
        "groups": {"type": "array", "items": {"type": "string"}},
        "manager": {"type": "string"},
        "attributes": @user_attributes@
      }
    },
    "tool": {
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "name": {"type": "string"},
        "version": {"type": "string"},
        "effect": {"type": "string"},
        "destructive": {"type": "boolean"},
        "read_only": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "classification": {"type": "string"},
        "owner": {"type": "string"},
        "sensitive": {"type": "array", "items": {"type": "string"}}
      }
    },
    "arguments": @arguments@,
    "facts": @facts@,
    "context": {
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "time": {"type": "string"},
        "hour": {"type": "integer"},
        "weekday": {"type": "integer"},
        "run_cost_cents": {"type": "integer"},
        "source": {"type": "string"}
      }
    }
  }
}`

// SchemaFile is the bundle file that narrows the open parts of the
// Request: an object whose members arguments, facts, agent_attributes and
// user_attributes are each a JSON Schema.
const SchemaFile = "schema.json"

var openParts = []string{"arguments", "facts", "agent_attributes", "user_attributes"}

// schemaSet builds the input schema of a bundle from its schema.json (""
// when it has none).
func schemaSet(bundleSchema string) (*ast.SchemaSet, error) {
	parts := map[string]json.RawMessage{}
	if bundleSchema != "" {
		if err := json.Unmarshal([]byte(bundleSchema), &parts); err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
		for name := range parts {
			if !slices.Contains(openParts, name) {
				return nil, fmt.Errorf("schema: %q is not an open part of the request (want %s)", name, strings.Join(openParts, ", "))
			}
		}
	}
	text := inputSchema
	for _, name := range openParts {
		part := `{"type": "object"}`
		if p, ok := parts[name]; ok {
			part = string(p)
		}
		text = strings.Replace(text, "@"+name+"@", part, 1)
	}
	var s any
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	ss := ast.NewSchemaSet()
	ss.Put(ast.SchemaRootRef, s)
	return ss, nil
}
