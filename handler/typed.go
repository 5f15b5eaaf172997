package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/jsondec"
	"github.com/toolplane/toolplane/policy"
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
	if d.InputSchema, err = derive(reflect.TypeFor[In](), in); err != nil {
		return d, fmt.Errorf("define %s: input schema: %w", d.Name, err)
	}
	if d.OutputSchema, err = derive(reflect.TypeFor[Out](), out); err != nil {
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
			// A schema derived from In (Define) admits only what In holds,
			// so this is a definition whose schema is wider than its type.
			// The value is still one the handler cannot take: the model is
			// told which field, and nothing runs.
			return nil, err
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

// decode reads validated arguments into In. A value In cannot hold (a
// number out of its range, a fraction for an integer) is answered as an
// *Invalid naming the field, so a typed handler or preview never turns the
// model's arguments into a platform fault.
func decode[In any](args any) (In, error) {
	var in In
	b, err := json.Marshal(args)
	if err != nil {
		return in, err
	}
	if err := strict.DecodeOnly(b, &in); err != nil {
		return in, decodeInvalid(err)
	}
	return in, nil
}

// strict decodes a typed handler's arguments, unknown fields refused, its
// decoders (and their buffers) reused from one call to the next rather
// than made for each.
var strict = jsondec.New(jsondec.Options{DisallowUnknownFields: true})

func decodeInvalid(err error) *Invalid {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		path := "/" + strings.ReplaceAll(te.Field, ".", "/")
		return &Invalid{
			FieldPath: path,
			Message:   fmt.Sprintf("%s: the %s sent cannot be held by this tool, which takes %s; send %s", te.Field, te.Value, typeWords(te.Type), typeWords(te.Type)),
		}
	}
	return &Invalid{Message: "the arguments do not fit the form this tool reads: " + err.Error()}
}

// typeWords describes a Go type the way a model writes JSON.
func typeWords(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		lo, hi := intRange(t.Bits())
		return fmt.Sprintf("a whole number from %s to %s written without a fraction or exponent", lo, hi)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return fmt.Sprintf("a whole number from 0 to %s written without a fraction or exponent", new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(t.Bits())), big.NewInt(1)))
	case reflect.Float32, reflect.Float64:
		return "a number within the range of a " + t.Kind().String()
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}

func intRange(bits int) (lo, hi *big.Int) {
	one := big.NewInt(1)
	hi = new(big.Int).Sub(new(big.Int).Lsh(one, uint(bits-1)), one)
	lo = new(big.Int).Neg(new(big.Int).Lsh(one, uint(bits-1)))
	return lo, hi
}

// derive encodes the schema For derived from t, with its numbers bounded.
func derive(t reflect.Type, s *jsonschema.Schema) (json.RawMessage, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return boundNumbers(t, raw)
}

// boundNumbers narrows the schema derived from t to what t can hold: an
// integer field is bounded to its Go type's range, a float field to its
// finite range. The bounds are written as exact JSON numbers (the
// validator compares exactly, and float64 holds neither 2^63-1 nor
// 2^64-1), which is why this works on the encoded schema rather than on
// jsonschema.Schema's float64 fields.
func boundNumbers(t reflect.Type, raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	boundType(t, doc, map[reflect.Type]bool{})
	return json.Marshal(doc)
}

func boundType(t reflect.Type, v any, seen map[reflect.Type]bool) {
	s, ok := v.(map[string]any)
	if !ok {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		lo, hi := intRange(t.Bits())
		setBounds(s, lo.String(), hi.String())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		hi := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(t.Bits())), big.NewInt(1))
		setBounds(s, "0", hi.String())
	case reflect.Float32:
		m := strconv.FormatFloat(math.MaxFloat32, 'e', -1, 32)
		setBounds(s, "-"+m, m)
	case reflect.Float64:
		m := strconv.FormatFloat(math.MaxFloat64, 'e', -1, 64)
		setBounds(s, "-"+m, m)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return // []byte is a base64 string
		}
		boundType(t.Elem(), s["items"], seen)
	case reflect.Map:
		boundType(t.Elem(), s["additionalProperties"], seen)
	case reflect.Struct:
		if seen[t] {
			return
		}
		seen[t] = true
		defer delete(seen, t)
		props, _ := s["properties"].(map[string]any)
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() && !f.Anonymous {
				continue
			}
			if f.Anonymous && name == "" {
				boundType(f.Type, s, seen) // embedded: its fields are the outer object's
				continue
			}
			if name == "" {
				name = f.Name
			}
			boundType(f.Type, props[name], seen)
		}
	}
}

// setBounds adds an inclusive range to a numeric schema that states none.
func setBounds(s map[string]any, lo, hi string) {
	if _, ok := s["minimum"]; !ok {
		if _, ok := s["exclusiveMinimum"]; !ok {
			s["minimum"] = json.Number(lo)
		}
	}
	if _, ok := s["maximum"]; !ok {
		if _, ok := s["exclusiveMaximum"]; !ok {
			s["maximum"] = json.Number(hi)
		}
	}
}

// Registry is the trusted set of handlers a deployment compiles in. A
// stored definition names a key; only this registry turns the key into
// code.
type Registry struct {
	mu       sync.RWMutex
	bindings map[string]*Binding
	facts    policy.Facts
}

// NewRegistry answers an empty registry.
func NewRegistry() *Registry {
	return &Registry{bindings: map[string]*Binding{}, facts: policy.Facts{}}
}

// RegisterFact adds the resolver of a policy fact the deployment's own
// tools declare (policy_facts): a value a rule needs that neither the
// arguments nor the platform know, such as the account an order belongs
// to. It is compiled in beside the handlers, as trusted as they are; the
// invoker runs it before each decision of a tool declaring it, under the
// fact's deadline, and its error makes the call a fault. A name
// registered twice is refused.
func (r *Registry) RegisterFact(name string, fn policy.FactResolver) error {
	if fn == nil {
		return fmt.Errorf("fact %q: nil resolver", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.facts[name]; dup {
		return fmt.Errorf("fact %q registered twice", name)
	}
	r.facts[name] = fn
	return nil
}

// FactResolver reports whether a resolver is registered for the fact name.
func (r *Registry) FactResolver(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.facts[name]
	return ok
}

// Facts answers a copy of the fact resolvers registered.
func (r *Registry) Facts() policy.Facts {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(policy.Facts, len(r.facts))
	for k, v := range r.facts {
		out[k] = v
	}
	return out
}

// Register adds bindings, with the policy facts each registers
// (WithFact); a key or a fact registered twice is refused, and nothing of
// the refused call is added.
func (r *Registry) Register(bs ...*Binding) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys, facts := map[string]bool{}, map[string]bool{}
	for _, b := range bs {
		if _, dup := r.bindings[b.Key]; dup || keys[b.Key] {
			return fmt.Errorf("handler %q registered twice", b.Key)
		}
		keys[b.Key] = true
		for name, fn := range b.facts {
			if _, dup := r.facts[name]; dup || facts[name] || fn == nil {
				return fmt.Errorf("handler %q: fact %q registered twice, or without a resolver", b.Key, name)
			}
			facts[name] = true
		}
	}
	for _, b := range bs {
		r.bindings[b.Key] = b
		for name, fn := range b.facts {
			r.facts[name] = fn
		}
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
