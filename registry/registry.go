package registry

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

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

// Registry holds tools that passed every registration check. Its
// catalogue can change while it serves (tools ingested from MCP servers
// come and go): readers see one consistent catalogue per lookup, swapped
// atomically, and a change is announced to watchers.
type Registry struct {
	opt   Options
	state atomic.Pointer[catalogue]

	mu       sync.Mutex // serialises changes to the catalogue
	watchMu  sync.Mutex
	watchers map[int]func()
	nextID   int
}

// catalogue is one immutable state of the registry.
type catalogue struct {
	tools  map[string]*Tool
	names  *modelname.Map
	sorted []*Tool
	// group names the group each tool was added in ("" for Build's).
	group map[string]string
}

// Build checks defs and, when all pass, answers the registry of them. The
// error is a *CheckError listing every problem. Each definition's
// SchemaHash is filled in when the file left it out.
func Build(defs []toolplane.Definition, opt Options) (*Registry, Report, error) {
	cs, names, rep, err := check(defs, opt)
	if err != nil {
		return nil, rep, err
	}
	cat := &catalogue{tools: make(map[string]*Tool, len(cs)), names: names, group: make(map[string]string, len(cs))}
	for _, c := range cs {
		t, err := newTool(c)
		if err != nil {
			return nil, rep, err
		}
		cat.tools[t.Def.Name] = t
		cat.group[t.Def.Name] = ""
		cat.sorted = append(cat.sorted, t)
	}
	sortTools(cat.sorted)
	r := &Registry{opt: opt}
	r.state.Store(cat)
	return r, rep, nil
}

// newTool completes a checked definition with its defaults and compiled
// form.
func newTool(c checked) (*Tool, error) {
	d := c.def
	if d.SchemaHash == "" {
		h, err := schemaHash(c.input.Doc(), c.output.Doc())
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", d.Name, err)
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
	return t, nil
}

func sortTools(ts []*Tool) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Def.Name < ts[j].Def.Name })
}

// SetGroup replaces the tools of one named group (the tools ingested from
// one MCP server, say) with defs, leaving every other tool as it is. Each
// definition is checked on its own against every tool outside the group:
// one that fails, or collides with a tool already registered (by platform
// or model-facing name), is refused and reported, never shadowing the
// other, while the rest of the group is still accepted. Group "" is the
// tools given to Build and cannot be replaced. Watchers are told when the
// catalogue changed.
func (r *Registry) SetGroup(group string, defs []toolplane.Definition) []Problem {
	if group == "" {
		return []Problem{{Tool: "(group)", Field: "group", Message: "the built-in catalogue cannot be replaced", Fix: "name the group"}}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.state.Load()
	var registered []string
	next := &catalogue{tools: map[string]*Tool{}, group: map[string]string{}}
	for _, t := range cur.sorted {
		if cur.group[t.Def.Name] == group {
			continue
		}
		registered = append(registered, t.Def.Name)
		next.tools[t.Def.Name] = t
		next.group[t.Def.Name] = cur.group[t.Def.Name]
		next.sorted = append(next.sorted, t)
	}
	var problems []Problem
	opt := r.opt
	for _, d := range defs {
		opt.Registered = registered
		cs, _, _, err := check([]toolplane.Definition{d}, opt)
		if err != nil {
			var ce *CheckError
			if errors.As(err, &ce) {
				problems = append(problems, ce.Problems...)
				continue
			}
			problems = append(problems, Problem{Tool: d.Name, Field: "(definition)", Message: err.Error()})
			continue
		}
		t, err := newTool(cs[0])
		if err != nil {
			problems = append(problems, Problem{Tool: d.Name, Field: "schema_hash", Message: err.Error()})
			continue
		}
		registered = append(registered, t.Def.Name)
		next.tools[t.Def.Name] = t
		next.group[t.Def.Name] = group
		next.sorted = append(next.sorted, t)
	}
	names, err := modelname.New(registered)
	if err != nil {
		// Every name was checked against the others one by one above.
		problems = append(problems, Problem{Tool: "(group " + group + ")", Field: "name", Message: err.Error()})
		return problems
	}
	next.names = names
	sortTools(next.sorted)
	changed := !sameTools(cur, next)
	r.state.Store(next)
	if changed {
		r.notify()
	}
	return problems
}

// Group answers the tools of one group, sorted by platform name.
func (r *Registry) Group(group string) []*Tool {
	cat := r.state.Load()
	var out []*Tool
	for _, t := range cat.sorted {
		if cat.group[t.Def.Name] == group {
			out = append(out, t)
		}
	}
	return out
}

// sameTools reports whether two catalogues hold the same tools at the same
// versions and contracts.
func sameTools(a, b *catalogue) bool {
	if len(a.sorted) != len(b.sorted) {
		return false
	}
	for i, t := range a.sorted {
		u := b.sorted[i]
		if t.Def.Name != u.Def.Name || t.Def.Version != u.Def.Version || t.Def.SchemaHash != u.Def.SchemaHash ||
			t.Def.Description != u.Def.Description || t.Def.Effect != u.Def.Effect || t.Def.Annotations != u.Def.Annotations {
			return false
		}
	}
	return true
}

// Watch calls fn after every change to the catalogue, until stop is
// called. fn runs on the goroutine that made the change and must not block.
func (r *Registry) Watch(fn func()) (stop func()) {
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	if r.watchers == nil {
		r.watchers = map[int]func(){}
	}
	id := r.nextID
	r.nextID++
	r.watchers[id] = fn
	return func() {
		r.watchMu.Lock()
		delete(r.watchers, id)
		r.watchMu.Unlock()
	}
}

func (r *Registry) notify() {
	r.watchMu.Lock()
	fns := make([]func(), 0, len(r.watchers))
	for _, fn := range r.watchers {
		fns = append(fns, fn)
	}
	r.watchMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// Get answers the tool with a platform name.
func (r *Registry) Get(name string) (*Tool, bool) {
	t, ok := r.state.Load().tools[name]
	return t, ok
}

// ByModelName answers the tool a model called by its model-facing name.
func (r *Registry) ByModelName(model string) (*Tool, bool) {
	cat := r.state.Load()
	name, ok := cat.names.Platform(model)
	if !ok {
		return nil, false
	}
	t, ok := cat.tools[name]
	return t, ok
}

// Tools answers every tool, sorted by platform name. The slice is a
// snapshot: it does not change when the catalogue does.
func (r *Registry) Tools() []*Tool { return r.state.Load().sorted }

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
