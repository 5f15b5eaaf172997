// Package projection turns a tool definition into the declarations other
// systems read: an MCP tools/list entry, an OpenAI function tool and an
// Anthropic tool. Every projection uses the model-facing name, because a
// model (behind an MCP client or a provider API) is what reads it; the
// platform name rides along in MCP metadata so a person can tell which
// contract stands behind a name.
package projection

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/modelname"
	"github.com/toolplane/toolplane/registry"
)

// Metadata keys toolplane writes into an MCP tool's _meta.
const (
	MetaPlatformName     = "toolplane/name"
	MetaVersion          = "toolplane/version"
	MetaRequiresApproval = "toolplane/requires_approval"
	MetaEffect           = "toolplane/effect"
)

// Shown projects a registered tool as an agent is shown it: the MCP entry
// of its definition, described as a model reads it (a deprecated version
// says so: registry.Tool.ModelDescription). Every door that shows a tool
// to a model projects it here, so none can drop the deprecation's line.
func Shown(t *registry.Tool) *mcp.Tool { return ShownFor(t, nil) }

// ShownFor is Shown for a caller shown only the tools shown reports (nil:
// every tool): see registry.Tool.ModelDescriptionFor.
func ShownFor(t *registry.Tool, shown func(name string) bool) *mcp.Tool {
	tool := MCP(&t.Def)
	tool.Description = t.ModelDescriptionFor(shown)
	return tool
}

// MCP projects d to an MCP tools/list entry. Annotation hints follow the
// definition: a read is readOnly; a write or send carries destructiveHint as
// declared (an MCP client assumes destructive when the hint is absent, so it
// is always written); openWorldHint likewise. The output schema is included
// only when its root is an object, the only shape MCP structured content
// takes, and never for a remote tool that declared none (see OutputSchema).
// Schemas are shown without vendor keywords (see Schema).
func MCP(d *toolplane.Definition) *mcp.Tool {
	destructive := d.Annotations.Destructive
	openWorld := d.Annotations.OpenWorld
	t := &mcp.Tool{
		Name:        modelname.Derive(d.Name),
		Title:       d.Title,
		Description: d.Description,
		InputSchema: InputSchema(d),
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:   d.Effect == toolplane.EffectRead,
			IdempotentHint: d.Annotations.Idempotent || d.Effect == toolplane.EffectRead,
			OpenWorldHint:  &openWorld,
		},
		Meta: mcp.Meta{
			MetaPlatformName:     d.Name,
			MetaVersion:          d.Version,
			MetaEffect:           string(d.Effect),
			MetaRequiresApproval: d.Annotations.RequiresApproval,
		},
	}
	if d.Effect != toolplane.EffectRead {
		t.Annotations.DestructiveHint = &destructive
	}
	if out := OutputSchema(d); rootIsObject(out) {
		t.OutputSchema = out
	}
	return t
}

func rootIsObject(raw json.RawMessage) bool {
	var root struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(raw, &root) != nil {
		return false
	}
	return root.Type == "object"
}

// OpenAIFunction is the declaration of a function tool in the OpenAI Chat
// Completions API ({"type":"function","function":{...}}).
type OpenAIFunction struct {
	Type     string         `json:"type"`
	Function OpenAIFuncBody `json:"function"`
}

// OpenAIFuncBody is the function part of an OpenAI tool declaration.
type OpenAIFuncBody struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// OpenAI projects d to an OpenAI function tool declaration. Strict mode is
// not requested: it requires every property to be required and forbids
// keywords the platform's own validation relies on, and toolplane validates
// the arguments itself either way.
func OpenAI(d *toolplane.Definition) OpenAIFunction {
	return OpenAIFunction{Type: "function", Function: OpenAIFuncBody{
		Name: modelname.Derive(d.Name), Description: d.Description, Parameters: InputSchema(d),
	}}
}

// AnthropicTool is the declaration of a client tool in the Anthropic
// Messages API.
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Anthropic projects d to an Anthropic tool declaration.
func Anthropic(d *toolplane.Definition) AnthropicTool {
	return AnthropicTool{Name: modelname.Derive(d.Name), Description: d.Description, InputSchema: InputSchema(d)}
}
