// Package schema compiles tool JSON Schemas (draft 2020-12) under bounds,
// applies the platform's small, fixed set of argument coercions, and turns
// validation failures into violations a model can act on.
//
// Compilation is bounded because a schema is data a tool author (or a remote
// MCP server) controls: a size cap and a depth cap keep a hostile document
// from exhausting memory or stack, reference cycles are refused so every walk
// over a schema terminates, a document whose references multiply (nested
// alternatives over $ref) is refused past an expansion bound, a regular
// expression whose compiled program is too large is refused (regex.go), and
// nothing is ever loaded from outside the document itself. Validation is
// bounded too (cost.go, numbers.go): a value whose validation would take
// more than a work bound (subschema evaluations, or pattern steps counted
// as bytes times instructions), or a number too large to read, is refused
// unchecked.
package schema

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Draft2020 is the only dialect toolplane accepts.
const Draft2020 = "https://json-schema.org/draft/2020-12/schema"

// Limits bound what Compile accepts.
type Limits struct {
	// MaxBytes is the largest schema document, in bytes of JSON.
	MaxBytes int
	// MaxDepth is the deepest nesting of JSON values in the document.
	MaxDepth int
	// MaxExpanded is the most subschemas the document may reach once every
	// $ref is followed, counted as often as the validator reaches them
	// (see cost.go); zero means DefaultLimits' value.
	MaxExpanded int64
	// MaxWork is the most subschema evaluations validating one value may
	// take; a value over it is refused unchecked. Zero means DefaultLimits'
	// value.
	MaxWork int64
	// MaxPatternProgram is the most instructions one regular expression (a
	// pattern, or a patternProperties name) may compile to: matching costs
	// that many steps per input byte (see regex.go). Zero means
	// DefaultLimits' value.
	MaxPatternProgram int
	// MaxPatternTotal is the most instructions all of the document's
	// regular expressions may compile to together, which bounds the cost of
	// compiling them. Zero means DefaultLimits' value.
	MaxPatternTotal int
	// MaxRegexWork is the most regular-expression steps validating one
	// value may take, each match counted as its input's length in bytes
	// times its program's instructions; a value over it is refused
	// unchecked. Zero means DefaultLimits' value.
	MaxRegexWork int64
}

// DefaultLimits are the platform ceilings for one schema document. The
// expansion and work limits sit well above any hand-written tool schema and
// its largest request, and keep the slowest validation they admit to
// a fraction of a second.
//
// The pattern limits were measured: ordinary patterns (ids, emails, UUIDs,
// dates and times, phone numbers) compile to 10–70 instructions and a
// bounded identifier such as ^[A-Za-z0-9_-]{1,256}$ to about 500, while
// [a-z]{1000}b compiles to 1,003. A step costs 7–14 ns of CPU, so the
// regex work limit holds the pattern work of one value (the fast path may
// spend a quarter of it before the reference validator runs) to 25–55 ms:
// the worst values it admits, 4,000 bytes against a 1,000-instruction
// pattern, measured that.
var DefaultLimits = Limits{
	MaxBytes: 256 << 10, MaxDepth: 32, MaxExpanded: 10_000, MaxWork: 250_000,
	MaxPatternProgram: 1000, MaxPatternTotal: 50_000, MaxRegexWork: 4_000_000,
}

// Sentinel errors a CompileError wraps, so callers can branch on the reason.
var (
	ErrTooLarge   = errors.New("schema too large")
	ErrTooDeep    = errors.New("schema nested too deeply")
	ErrRefCycle   = errors.New("schema reference cycle")
	ErrTooComplex = errors.New("schema too complex")
	ErrRemoteRef  = errors.New("schema reference outside the document")
	ErrDialect    = errors.New("schema dialect is not draft 2020-12")
	ErrInvalid    = errors.New("invalid schema")
)

// CompileError says why a schema was refused and where.
type CompileError struct {
	// Pointer is the JSON pointer, inside the schema, of the offending part
	// ("" for the whole document).
	Pointer string
	// Reason is one of the sentinel errors above.
	Reason error
	// Detail is a sentence a tool author reads.
	Detail string
}

func (e *CompileError) Error() string {
	at := ""
	if e.Pointer != "" {
		at = " at " + e.Pointer
	}
	return fmt.Sprintf("%v%s: %s", e.Reason, at, e.Detail)
}

func (e *CompileError) Unwrap() error { return e.Reason }

// Schema is a compiled schema with the coercion plan derived from it.
type Schema struct {
	doc      any
	compiled *jsonschema.Schema
	plan     *node
	fast     *fastNode // nil when the schema needs the reference validator
	cost     *costNode
	maxWork  int64
	maxRegex int64
	// sensitive are the pointers of the properties marked x-sensitive.
	sensitive []string
	// text is what the schema's x-outside-text marks say.
	text textMarks
	// classified are the fields marked x-classification, by path.
	classified []Classified
}

// Doc returns the decoded schema document (plain JSON values with
// json.Number numbers). Callers must not modify it.
func (s *Schema) Doc() any { return s.doc }

// Compile compiles a schema document under DefaultLimits.
func Compile(raw []byte) (*Schema, error) { return CompileLimits(raw, DefaultLimits) }

// refusingLoader is the compiler's only loader: a schema never reaches the
// network or the file system, whatever its $ref or $schema say.
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%w: %s is not loaded; inline it under $defs", ErrRemoteRef, url)
}

// docURL is where the compiler files the document. It is not fetched.
const docURL = "urn:toolplane:schema"

// CompileLimits compiles a schema document under the given limits.
func CompileLimits(raw []byte, lim Limits) (*Schema, error) {
	if len(raw) > lim.MaxBytes {
		return nil, &CompileError{Reason: ErrTooLarge, Detail: fmt.Sprintf("%d bytes, the limit is %d; move shared parts under $defs or simplify the schema", len(raw), lim.MaxBytes)}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &CompileError{Reason: ErrInvalid, Detail: fmt.Sprintf("not JSON: %v", err)}
	}
	return compileDoc(doc, lim)
}

// CompileValue compiles an already decoded schema document (json.Number
// numbers) under the given limits.
func CompileValue(doc any, lim Limits) (*Schema, error) {
	if n := approxSize(doc, lim.MaxBytes+1); n > lim.MaxBytes {
		return nil, &CompileError{Reason: ErrTooLarge, Detail: fmt.Sprintf("more than %d bytes; move shared parts under $defs or simplify the schema", lim.MaxBytes)}
	}
	return compileDoc(doc, lim)
}

func compileDoc(doc any, lim Limits) (*Schema, error) {
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, &CompileError{Reason: ErrInvalid, Detail: "a schema is a JSON object (or true/false)"}
	}
	if p, ok := tooDeep(doc, lim.MaxDepth, ""); !ok {
		return nil, &CompileError{Pointer: p, Reason: ErrTooDeep, Detail: fmt.Sprintf("nesting deeper than %d levels; flatten it or move parts under $defs", lim.MaxDepth)}
	}
	if m, ok := doc.(map[string]any); ok {
		if d, ok := m["$schema"]; ok {
			s, _ := d.(string)
			if strings.TrimSuffix(s, "#") != Draft2020 {
				return nil, &CompileError{Pointer: "/$schema", Reason: ErrDialect, Detail: fmt.Sprintf("%v is not accepted; use %q or omit $schema", d, Draft2020)}
			}
		}
	}
	anchors, err := collectRefs(doc)
	if err != nil {
		return nil, err
	}
	if err := checkCycles(doc, anchors); err != nil {
		return nil, err
	}
	if lim.MaxExpanded <= 0 {
		lim.MaxExpanded = DefaultLimits.MaxExpanded
	}
	if lim.MaxWork <= 0 {
		lim.MaxWork = DefaultLimits.MaxWork
	}
	if lim.MaxPatternProgram <= 0 {
		lim.MaxPatternProgram = DefaultLimits.MaxPatternProgram
	}
	if lim.MaxPatternTotal <= 0 {
		lim.MaxPatternTotal = DefaultLimits.MaxPatternTotal
	}
	if lim.MaxRegexWork <= 0 {
		lim.MaxRegexWork = DefaultLimits.MaxRegexWork
	}
	// Measured before the compiler builds any of them: it compiles each
	// pattern more than once (the meta-schema checks it is a regex too).
	progs, err := checkPatterns(doc, lim)
	if err != nil {
		return nil, err
	}
	// Counted before the compiler and the coercion plan run: both follow
	// references, and the plan merges $ref and allOf as often as they are
	// reached.
	cost := buildCost(doc, anchors, progs)
	if cost.expanded > lim.MaxExpanded {
		reached := strconv.FormatInt(cost.expanded, 10)
		if cost.expanded >= maxCount {
			reached = "more than " + reached
		}
		return nil, &CompileError{Reason: ErrTooComplex, Detail: fmt.Sprintf("it reaches %s subschemas once its references are followed, and the limit is %d (MaxExpanded), so one validation could take seconds; nested anyOf/oneOf/allOf over $ref multiply at every level: share fewer branches or flatten the alternatives", reached, lim.MaxExpanded)}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(refusingLoader{})
	if err := c.AddResource(docURL, doc); err != nil {
		return nil, &CompileError{Reason: ErrInvalid, Detail: err.Error()}
	}
	compiled, err := c.Compile(docURL)
	if err != nil {
		reason := ErrInvalid
		if errors.Is(err, ErrRemoteRef) {
			reason = ErrRemoteRef
		}
		return nil, &CompileError{Reason: reason, Detail: compileDetail(err)}
	}
	text, err := readTextMarks(doc)
	if err != nil {
		return nil, err
	}
	classified, err := readClassification(doc)
	if err != nil {
		return nil, err
	}
	return &Schema{classified: classified, doc: doc, compiled: compiled, plan: buildPlan(doc), fast: compileFast(doc, progs), cost: cost, maxWork: lim.MaxWork, maxRegex: lim.MaxRegexWork,
		sensitive: sensitivePaths(doc), text: text}, nil
}

// compileDetail shortens the compiler's message: it names our internal
// document URL, which means nothing to a tool author.
func compileDetail(err error) string {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, docURL+"#", "#")
	msg = strings.ReplaceAll(msg, docURL, "schema")
	return msg
}

func tooDeep(v any, left int, at string) (string, bool) {
	if left < 0 {
		return at, false
	}
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			if p, ok := tooDeep(c, left-1, at+"/"+escape(k)); !ok {
				return p, false
			}
		}
	case []any:
		for i, c := range v {
			if p, ok := tooDeep(c, left-1, at+"/"+strconv.Itoa(i)); !ok {
				return p, false
			}
		}
	}
	return "", true
}

// approxSize is an upper-bounded estimate of the encoded size of v, used
// only to refuse huge decoded documents early; it stops counting at stop.
func approxSize(v any, stop int) int {
	n := 0
	var walk func(any)
	walk = func(v any) {
		if n > stop {
			return
		}
		switch v := v.(type) {
		case map[string]any:
			n += 2
			for k, c := range v {
				n += len(k) + 4
				walk(c)
			}
		case []any:
			n += 2
			for _, c := range v {
				n++
				walk(c)
			}
		case string:
			n += len(v) + 2
		default:
			n += len(fmt.Sprint(v))
		}
	}
	walk(v)
	return n
}

// escape writes one JSON pointer token.
func escape(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
}

func unescape(tok string) string {
	if !strings.Contains(tok, "~") {
		return tok
	}
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
}
