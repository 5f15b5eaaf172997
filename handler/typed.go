package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolplane/toolplane"
)

// Define fills d's input and output schemas from the Go types In and Out,
// so the contract the model is told and the types the handler decodes
// cannot drift apart. In must be a struct (a model sends one object). Field
// descriptions come from `jsonschema:"..."` tags; a field without
// omitempty/omitzero is required. d must not carry schemas of its own.
func Define[In, Out any](d toolplane.Definition) (toolplane.Definition, error) {
	if len(d.InputSchema) > 0 || len(d.OutputSchema) > 0 {
		return d, fmt.Errorf("define %s: schemas are derived from the Go types; leave input_schema and output_schema empty", d.Name)
	}
	in, err := jsonschema.For[In](nil)
	if err != nil {
		return d, fmt.Errorf("define %s: input type: %w", d.Name, err)
	}
	if in.Type != "object" {
		return d, fmt.Errorf("define %s: the input type must be a struct, got schema type %q", d.Name, in.Type)
	}
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		return d, fmt.Errorf("define %s: output type: %w", d.Name, err)
	}
	if d.InputSchema, err = json.Marshal(in); err != nil {
		return d, fmt.Errorf("define %s: input schema: %w", d.Name, err)
	}
	if d.OutputSchema, err = json.Marshal(out); err != nil {
		return d, fmt.Errorf("define %s: output schema: %w", d.Name, err)
	}
	return d, nil
}

// TypedFunc is a handler body over Go types.
type TypedFunc[In, Out any] func(ctx context.Context, call Call, in In) (Out, error)

// Bind binds a typed handler body under key. The validated arguments are
// decoded into In; the answer is rendered from Out by the result boundary.
// classify decides, for each error that is not one of the package's neutral
// or business errors, whether it is Explain, Uncertain or Raise; there is no
// default beyond Raise, because an error after a request was sent must not
// look like a clean failure the model could simply retry.
func Bind[In, Out any](key string, fn TypedFunc[In, Out], classify func(error) Ending, opts ...Option) (*Binding, error) {
	if fn == nil {
		return nil, fmt.Errorf("bind %q: nil function", key)
	}
	return BindFunc(key, func(ctx context.Context, call Call, args any) (any, error) {
		in, err := decode[In](args)
		if err != nil {
			// The arguments passed the input schema derived from In, so a
			// decode failure means the definition and the type drifted
			// apart: a defect of the deployment, never the model's.
			return nil, fmt.Errorf("decode arguments of %s: %w", call.Tool, err)
		}
		return fn(ctx, call, in)
	}, classify, opts...)
}

// TypedPreview adapts a typed preview for WithPreview.
func TypedPreview[In any](p func(ctx context.Context, call Call, in In) (string, error)) PreviewFunc {
	return func(ctx context.Context, call Call, args any) (string, error) {
		in, err := decode[In](args)
		if err != nil {
			return "", err
		}
		return p(ctx, call, in)
	}
}

func decode[In any](args any) (In, error) {
	var in In
	b, err := json.Marshal(args)
	if err != nil {
		return in, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err = dec.Decode(&in)
	return in, err
}

// Registry is the trusted set of handlers a deployment compiles in. A
// stored definition names a key; only this registry turns the key into
// code.
type Registry struct {
	mu       sync.RWMutex
	bindings map[string]*Binding
}

// NewRegistry answers an empty registry.
func NewRegistry() *Registry { return &Registry{bindings: map[string]*Binding{}} }

// Register adds bindings; a key registered twice is refused.
func (r *Registry) Register(bs ...*Binding) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range bs {
		if _, dup := r.bindings[b.Key]; dup {
			return fmt.Errorf("handler %q registered twice", b.Key)
		}
		r.bindings[b.Key] = b
	}
	return nil
}

// Get answers the binding under key.
func (r *Registry) Get(key string) (*Binding, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	b, ok := r.bindings[key]
	return b, ok
}

// Keys answers every registered key, sorted.
func (r *Registry) Keys() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	keys := make([]string, 0, len(r.bindings))
	for k := range r.bindings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Handler answers whether key is registered and renders previews; with
// Connection and FactResolver it lets the registry package resolve
// definitions against this deployment.
func (r *Registry) Handler(key string) (found, preview bool) {
	b, ok := r.Get(key)
	return ok, ok && b.HasPreview()
}
