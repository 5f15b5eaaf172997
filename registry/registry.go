package registry

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/modelname"
	"github.com/toolplane/toolplane/schema"
)

// Tool is a checked definition with its compiled schemas: the form every
// later step (validation, the boundary, projections) reads.
type Tool struct {
	Def toolplane.Definition
	// Model is the model-facing name.
	Model  string
	input  *schema.Schema
	output *schema.Schema
	spec   boundary.Spec
}

// Registry holds tools that passed every registration check.
type Registry struct {
	tools  map[string]*Tool
	names  *modelname.Map
	sorted []*Tool
}

// Build checks defs and, when all pass, answers the registry of them. The
// error is a *CheckError listing every problem. Each definition's
// SchemaHash is filled in when the file left it out.
func Build(defs []toolplane.Definition, opt Options) (*Registry, Report, error) {
	cs, names, rep, err := check(defs, opt)
	if err != nil {
		return nil, rep, err
	}
	r := &Registry{tools: make(map[string]*Tool, len(cs)), names: names}
	for _, c := range cs {
		d := c.def
		if d.SchemaHash == "" {
			h, err := schemaHash(c.input.Doc(), c.output.Doc())
			if err != nil {
				return nil, rep, fmt.Errorf("tool %s: %w", d.Name, err)
			}
			d.SchemaHash = h
		}
		if d.Timeout == 0 {
			d.Timeout = toolplane.Duration(DefaultTimeout)
		}
		if d.Mode == "" {
			d.Mode = toolplane.ModeSync
		}
		if d.Retry == "" {
			d.Retry = toolplane.RetryNone
		}
		t := &Tool{Def: d, Model: modelname.Derive(d.Name), input: c.input, output: c.output}
		t.spec = boundary.SpecFor(&t.Def)
		r.tools[d.Name] = t
		r.sorted = append(r.sorted, t)
	}
	sort.Slice(r.sorted, func(i, j int) bool { return r.sorted[i].Def.Name < r.sorted[j].Def.Name })
	return r, rep, nil
}

// Get answers the tool with a platform name.
func (r *Registry) Get(name string) (*Tool, bool) {
	t, ok := r.tools[name]
	return t, ok
}

// ByModelName answers the tool a model called by its model-facing name.
func (r *Registry) ByModelName(model string) (*Tool, bool) {
	name, ok := r.names.Platform(model)
	if !ok {
		return nil, false
	}
	return r.Get(name)
}

// Tools answers every tool, sorted by platform name.
func (r *Registry) Tools() []*Tool { return r.sorted }

// DecodeArguments reads a JSON argument text the way validation expects it
// (numbers kept exact). Invalid JSON answers an invalid_input result.
func DecodeArguments(raw []byte) (any, *toolplane.Result) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		r := toolplane.Invalid([]toolplane.Violation{{
			FieldPath: "", Constraint: "json",
			Message:      "the arguments are not valid JSON: " + err.Error(),
			SuggestedFix: "send the arguments as one JSON object",
		}})
		return nil, &r
	}
	return v, nil
}

// Arguments validates decoded arguments under the bounded coercion rules.
// It answers the coerced arguments (what later steps see and hash) and the
// coercions made, or the invalid_input result listing every violation.
func (t *Tool) Arguments(args any) (any, []schema.Coercion, *toolplane.Result) {
	out, log, vs := t.input.Check(args)
	if len(vs) > 0 {
		r := toolplane.Invalid(vs)
		return nil, log, &r
	}
	return out, log, nil
}

// CheckBatch answers batch_too_large when the batch argument of valid
// arguments holds more items than the tool takes in one call, and nil
// otherwise. An absent batch counts as zero items. The call is refused
// whole, never split: splitting is the caller's coordination.
func (t *Tool) CheckBatch(args any) *toolplane.Result {
	d := &t.Def
	if d.BatchArgument == "" {
		return nil
	}
	m, _ := args.(map[string]any)
	items, _ := m[d.BatchArgument].([]any)
	if len(items) <= d.MaxBatchSize {
		return nil
	}
	r := toolplane.Fail(toolplane.CodeBatchTooLarge, fmt.Sprintf(
		"%s holds %d items; %s takes at most %d per call. Split the items across several calls of at most %d each.",
		d.BatchArgument, len(items), t.Model, d.MaxBatchSize, d.MaxBatchSize))
	r.Error.FieldPath = "/" + d.BatchArgument
	r.Error.Constraint = "max_batch_size"
	r.Error.SuggestedFix = fmt.Sprintf("send at most %d items in %s per call", d.MaxBatchSize, d.BatchArgument)
	return &r
}

// Output turns a handler's answer into the result a model reads: the answer
// is validated against the output schema first (a failure is invalid_output,
// the tool's fault, with the violations returned for the operator, not the
// model), then redacted, bounded and labelled by the boundary.
func (t *Tool) Output(out any) (toolplane.Result, []toolplane.Violation) {
	plain := boundary.Normalize(out)
	if vs := t.output.Validate(plain); len(vs) > 0 {
		r := toolplane.Fail(toolplane.CodeInvalidOutput, fmt.Sprintf(
			"%s answered in a form that breaks its own output contract, so its answer is withheld. This is a fault of the tool, not of your arguments; do not retry the same call.", t.Model))
		return r, vs
	}
	data, meta := boundary.Apply(plain, t.spec)
	return toolplane.Result{OK: true, Data: data, Meta: meta}, nil
}

// Input answers the compiled input schema.
func (t *Tool) Input() *schema.Schema { return t.input }

// OutputSchema answers the compiled output schema.
func (t *Tool) OutputSchema() *schema.Schema { return t.output }

// Static is Bindings held in memory: the handler keys, connections and fact
// resolvers a deployment (or a lint run describing one) declares.
type Static struct {
	Handlers      map[string]bool // key -> has a preview
	Connections   map[string]bool
	FactResolvers map[string]bool
}

// Handler implements Bindings.
func (s Static) Handler(key string) (bool, bool) {
	preview, ok := s.Handlers[key]
	return ok, preview
}

// Connection implements Bindings.
func (s Static) Connection(id string) bool { return s.Connections[id] }

// FactResolver implements Bindings.
func (s Static) FactResolver(name string) bool { return s.FactResolvers[name] }
