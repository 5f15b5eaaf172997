// Package registry decides which tool definitions may run and holds the ones
// that may. Check runs every registration check and reports each failure
// with the field it concerns and how to fix it; Build compiles what passed
// into a Registry of runnable tools. A broken definition never enters a
// Registry: the checks run when definitions are loaded or published, never
// per call.
package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/canonical"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/modelname"
	httpruntime "github.com/toolplane/toolplane/runtime/http"
	sqlruntime "github.com/toolplane/toolplane/runtime/sql"
	"github.com/toolplane/toolplane/schema"
	"github.com/toolplane/toolplane/semver"
)

// Ceilings are the platform limits a definition's own limits must stay
// within.
type Ceilings struct {
	MaxOutputBytes    int
	MaxResults        int
	MaxBatchSize      int
	MaxSyncTimeout    time.Duration
	MaxAsyncTimeout   time.Duration
	MaxReplayAttempts int
	MaxDescription    int
	MaxPolicyFacts    int
}

// DefaultCeilings are the platform's ceilings.
var DefaultCeilings = Ceilings{
	MaxOutputBytes:    boundary.PlatformLimit,
	MaxResults:        10_000,
	MaxBatchSize:      1_000,
	MaxSyncTimeout:    2 * time.Minute,
	MaxAsyncTimeout:   24 * time.Hour,
	MaxReplayAttempts: 100,
	MaxDescription:    4_096,
	MaxPolicyFacts:    16,
}

// DefaultTimeout bounds a handler whose definition names no timeout.
const DefaultTimeout = 30 * time.Second

// Bindings answers what a deployment trusts: the handlers compiled into it,
// the connections it holds and the policy fact resolvers it registered. The
// registry resolves a definition's references through it and never through
// anything a definition carries.
type Bindings interface {
	// Handler reports whether a handler is registered under key, and
	// whether it can render an approval preview.
	Handler(key string) (found, preview bool)
	// Connection reports whether a remote connection with this id exists.
	Connection(id string) bool
	// FactResolver reports whether a resolver is registered for a policy
	// fact of this name.
	FactResolver(name string) bool
}

// Problem is one failed check: toolplane.Problem, with the tool it
// concerns always named.
type Problem = toolplane.Problem

// CheckError lists every problem found in a set of definitions.
type CheckError struct {
	Problems []Problem
}

func (e *CheckError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return fmt.Sprintf("%d registration problem(s):\n  %s", len(e.Problems), strings.Join(lines, "\n  "))
}

// Options configure Check and Build.
type Options struct {
	// Bindings resolves handler, connection and fact references. Nil means
	// the caller has no deployment to resolve against (an offline lint):
	// those references are then listed in Report.Unresolved instead of
	// being checked.
	Bindings Bindings
	// Ceilings default to DefaultCeilings when zero.
	Ceilings Ceilings
	// Registered names tools already in the catalogue, so a new definition
	// that collides with one (by platform or model-facing name) is refused.
	Registered []string
	// Runtimes are the runtimes a definition may be bound to instead of a
	// handler or a remote tool; a definition bound to one is checked with
	// that runtime's own checks. Nil means the platform's, http and sql.
	Runtimes *handler.Runtimes
}

// platformRuntimes are the platform's runtimes, as the registry checks the
// definitions bound to them.
var platformRuntimes = func() *handler.Runtimes {
	rs, err := handler.NewRuntimes(httpruntime.Checks(), sqlruntime.Checks())
	if err != nil {
		panic(err) // two fixed runtimes of distinct kinds: a defect here
	}
	return rs
}()

// Report is what Check found beyond problems.
type Report struct {
	// Unresolved lists references left unchecked because no Bindings were
	// given, as "handler payments.refund_order" and the like.
	Unresolved []string
}

// reservedFacts are names a policy already reads directly; a fact may not
// shadow them.
var reservedFacts = map[string]bool{"principal": true, "run": true, "arguments": true}

var (
	segment     = `[a-z][a-z0-9_-]*`
	platformRE  = regexp.MustCompile(`^` + segment + `\.` + segment + `$`)
	mcpRE       = regexp.MustCompile(`^mcp\.([a-z0-9][a-z0-9_-]*)\.([A-Za-z0-9_][A-Za-z0-9_.-]*)$`)
	handlerKey  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:/-]*$`)
	factRE      = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	itemKindRE  = regexp.MustCompile(`^` + segment + `(\.` + segment + `)*$`)
	maxNameSize = 128
)

// SchemaHash answers the canonical hash of a definition's input and output
// schemas: key order, whitespace and number spelling do not change it.
func SchemaHash(d *toolplane.Definition) (string, error) {
	in, err := decodeSchema(d.InputSchema)
	if err != nil {
		return "", fmt.Errorf("input_schema: %w", err)
	}
	out, err := decodeSchema(d.OutputSchema)
	if err != nil {
		return "", fmt.Errorf("output_schema: %w", err)
	}
	return schemaHash(in, out)
}

// schemaHash hashes decoded input and output schemas.
func schemaHash(in, out any) (string, error) {
	h, err := canonical.Hash(map[string]any{"input_schema": in, "output_schema": out})
	if err != nil {
		return "", fmt.Errorf("schema hash: %w", err)
	}
	return "sha256:" + h, nil
}

func decodeSchema(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// Check runs every registration check over defs and answers every problem,
// sorted by tool then field. A nil error means all of them may run.
func Check(defs []toolplane.Definition, opt Options) (Report, error) {
	_, _, rep, err := check(defs, opt)
	return rep, err
}

type checked struct {
	def    toolplane.Definition
	input  *schema.Schema
	output *schema.Schema
}

// check answers the checked definitions and the model-facing name map over
// them and the registered names: the one map a Registry then answers from.
func check(defs []toolplane.Definition, opt Options) ([]checked, *modelname.Map, Report, error) {
	c := opt.Ceilings
	if c == (Ceilings{}) {
		c = DefaultCeilings
	}
	runtimes := opt.Runtimes
	if runtimes == nil {
		runtimes = platformRuntimes
	}
	var rep Report
	var problems []Problem
	out := make([]checked, 0, len(defs))
	seen := map[string]bool{}
	for _, n := range opt.Registered {
		seen[n] = true
	}
	var names []string
	for i := range defs {
		d := &defs[i]
		ch := &checker{d: d, c: c, b: opt.Bindings, runtimes: runtimes, rep: &rep}
		ch.run()
		if d.Name != "" {
			if seen[d.Name] {
				ch.add("name", fmt.Sprintf("%s is already registered", quote(d.Name)), "choose another name; a tool is never shadowed or replaced by registering it again (publish a new version instead)")
			}
			seen[d.Name] = true
			if len(d.Name) <= maxNameSize { // an over-long name is a problem already
				names = append(names, d.Name)
			}
		}
		problems = append(problems, ch.problems...)
		out = append(out, checked{def: *d, input: ch.input, output: ch.output})
	}
	nameMap, err := modelname.New(append(append([]string(nil), opt.Registered...), dedupe(names)...))
	if err != nil {
		var me *modelname.Error
		if errors.As(err, &me) {
			for _, p := range me.Refused {
				if p.Platform == "" || p.Err == modelname.ErrDuplicate {
					continue
				}
				problems = append(problems, Problem{Tool: toolplane.Clip(p.Platform), Field: "name", Message: p.Error(), Fix: "rename the tool so its model-facing name is unique and at most 64 characters"})
			}
		}
	}
	sort.SliceStable(problems, func(i, j int) bool {
		if problems[i].Tool != problems[j].Tool {
			return problems[i].Tool < problems[j].Tool
		}
		return problems[i].Field < problems[j].Field
	})
	sort.Strings(rep.Unresolved)
	if len(problems) > 0 {
		return nil, nil, rep, &CheckError{Problems: problems}
	}
	return out, nameMap, rep, nil
}

func dedupe(names []string) []string {
	seen := map[string]bool{}
	out := names[:0:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

type checker struct {
	d        *toolplane.Definition
	c        Ceilings
	b        Bindings
	runtimes *handler.Runtimes
	rep      *Report
	problems []Problem
	input    *schema.Schema
	output   *schema.Schema
}

func (ch *checker) add(field, msg, fix string) {
	tool := toolplane.Clip(ch.d.Name)
	if tool == "" {
		tool = "(unnamed)"
	}
	ch.problems = append(ch.problems, Problem{Tool: tool, Field: field, Message: msg, Fix: fix})
}

// quote answers s clipped and quoted, as a problem's message shows a
// value.
func quote[S ~string](s S) string { return strconv.Quote(toolplane.Clip(string(s))) }

func (ch *checker) unresolved(what string) {
	ch.rep.Unresolved = append(ch.rep.Unresolved, what)
}

func (ch *checker) run() {
	ch.name()
	ch.text()
	ch.schemas()
	ch.binding()
	ch.effect()
	ch.limits()
	ch.price()
	ch.batch()
	ch.facts()
	ch.approval()
	ch.execution()
	ch.attempts()
	ch.dependencies()
}

func (ch *checker) dependencies() {
	seen := map[toolplane.Dependency]bool{}
	for i, dep := range ch.d.Dependencies {
		field := fmt.Sprintf("dependencies[%d]", i)
		switch dep.Relation {
		case toolplane.RequiresOutputOf, toolplane.CommonlyPairedWith:
		default:
			ch.add(field+".relation", fmt.Sprintf("%s is not a relation", quote(dep.Relation)), "use requires_output_of or commonly_paired_with")
		}
		name, rng := semver.SplitRef(dep.Tool)
		if !platformRE.MatchString(name) && !mcpRE.MatchString(name) {
			ch.add(field+".tool", fmt.Sprintf("%s is not a tool name", quote(name)), "name the other tool by its platform name, optionally with a range (payments.get_order@^1.0.0)")
		} else if name == ch.d.Name {
			ch.add(field+".tool", "names the tool itself", "remove the edge")
		}
		if rng != "" {
			if _, err := semver.ParseRange(rng); err != nil {
				ch.add(field+".tool", err.Error(), "use a range such as ^1.2.0, ~1.2.0 or 1.2.0")
			}
		}
		if seen[dep] {
			ch.add(field, "listed twice", "list each edge once")
		}
		seen[dep] = true
	}
}

func (ch *checker) name() {
	d := ch.d
	switch {
	case d.Name == "":
		ch.add("name", "missing", "name the tool namespace.verb, for example crm.search_people")
	case len(d.Name) > maxNameSize:
		ch.add("name", fmt.Sprintf("%d characters, the limit is %d", len(d.Name), maxNameSize), "shorten the name")
	case d.Kind == toolplane.KindMCP:
		m := mcpRE.FindStringSubmatch(d.Name)
		if m == nil {
			ch.add("name", fmt.Sprintf("%s is not mcp.<connection>.<remote tool>", quote(d.Name)), "name an ingested tool mcp.<connection slug>.<the name its server publishes>")
		} else if d.Binding.Remote != nil && d.Binding.Remote.RemoteName != "" && m[2] != d.Binding.Remote.RemoteName {
			ch.add("name", fmt.Sprintf("ends in %s but the binding names remote tool %s", quote(m[2]), quote(d.Binding.Remote.RemoteName)), "make the last part of the name the remote tool's own name")
		}
	case strings.HasPrefix(d.Name, "mcp."):
		ch.add("name", "the mcp. prefix is reserved for tools ingested from MCP servers", "choose a namespace of your own; a platform tool can never claim an MCP name")
	case !platformRE.MatchString(d.Name):
		ch.add("name", fmt.Sprintf("%s is not namespace.verb", quote(d.Name)), "use two lowercase parts joined by one dot, letters, digits, '_' or '-', each starting with a letter (payments.refund_order)")
	case metaToolNames[modelname.Derive(d.Name)]:
		ch.add("name", fmt.Sprintf("%s is shown to a model as %s, a meta-tool's name", quote(d.Name), modelname.Derive(d.Name)), "choose another name: an MCP session in meta-tool mode lists find_tools, describe_tool and call_tool")
	}
}

// metaToolNames are the model-facing names of the meta-tools
// (discovery.MetaTools), which no tool may take.
var metaToolNames = map[string]bool{"find_tools": true, "describe_tool": true, "call_tool": true}

// maxTitle bounds a title and each search hint, maxSearchHints the number
// of hints, and maxTags and maxTag the tags: a few words each, so no tool
// buys its way up every search by volume, nor makes every answer that
// names it large.
const (
	maxTitle       = 128
	maxSearchHints = 16
	maxTags        = 32
	maxTag         = 64
)

func (ch *checker) text() {
	d := ch.d
	switch {
	case strings.TrimSpace(d.Description) == "":
		ch.add("description", "missing", "describe, for the model, what the tool does, when to use it and when not to")
	case len(d.Description) > ch.c.MaxDescription:
		ch.add("description", fmt.Sprintf("%d bytes, the limit is %d", len(d.Description), ch.c.MaxDescription), "shorten it; move detail into the field descriptions")
	}
	if len(d.Title) > maxTitle {
		ch.add("title", fmt.Sprintf("%d bytes, the limit is %d", len(d.Title), maxTitle), "shorten it to a few words; the description says the rest")
	}
	if len(d.Tags) > maxTags {
		ch.add("tags", fmt.Sprintf("%d tags, the limit is %d", len(d.Tags), maxTags), "keep the tags policy and search read")
	}
	for i, tag := range d.Tags {
		if strings.TrimSpace(tag) == "" || len(tag) > maxTag {
			ch.add(fmt.Sprintf("tags[%d]", i), fmt.Sprintf("%d bytes: a tag is 1 to %d bytes", len(tag), maxTag), "use a short word such as finance")
		}
	}
	if len(d.SearchHints) > maxSearchHints {
		ch.add("search_hints", fmt.Sprintf("%d hints, the limit is %d", len(d.SearchHints), maxSearchHints), "keep the phrases people really search with")
	}
	for i, h := range d.SearchHints {
		if strings.TrimSpace(h) == "" || len(h) > maxTitle {
			ch.add(fmt.Sprintf("search_hints[%d]", i), fmt.Sprintf("%d bytes: a hint is 1 to %d bytes", len(h), maxTitle), "write a short phrase")
		}
	}
	if d.Version == "" {
		ch.add("version", "missing", "give a semantic version such as 1.0.0")
	} else if len(d.Version) > toolplane.MaxRefLen {
		// The parser's error would quote it whole.
		ch.add("version", fmt.Sprintf("%d bytes, the limit is %d", len(d.Version), toolplane.MaxRefLen), "use MAJOR.MINOR.PATCH, such as 2.1.0")
	} else if _, err := semver.Parse(d.Version); err != nil {
		// The parser the registry orders and resolves versions with, so a
		// version it cannot read is refused here, not kept as 0.0.0.
		ch.add("version", fmt.Sprintf("%s is not a semantic version: %v", quote(d.Version), err), "use MAJOR.MINOR.PATCH, such as 2.1.0")
	}
	if d.ItemKind != "" && !itemKindRE.MatchString(d.ItemKind) {
		ch.add("item_kind", fmt.Sprintf("%s is not a resource kind", quote(d.ItemKind)), "use a dotted lowercase kind such as crm.person")
	}
}

func (ch *checker) schemas() {
	d := ch.d
	compile := func(field string, raw json.RawMessage, required bool) *schema.Schema {
		if len(raw) == 0 || string(raw) == "null" {
			if required {
				ch.add(field, "missing", "declare a JSON Schema (draft 2020-12)")
			}
			return nil
		}
		s, err := schema.Compile(raw)
		if err != nil {
			ch.add(field, err.Error(), "correct the schema; references must point inside it (#/$defs/...), and it may not refer to itself")
			return nil
		}
		return s
	}
	ch.input = compile("input_schema", d.InputSchema, true)
	ch.output = compile("output_schema", d.OutputSchema, true)
	compile("error_schema", d.ErrorSchema, false)
	if m, _ := docOf(ch.input); ch.input != nil && m["type"] != "object" {
		ch.add("input_schema", "the root is not type: object", "model providers pass arguments as one object: make the root {\"type\": \"object\", \"properties\": {...}}")
	}
	if ch.input != nil && ch.output != nil && d.SchemaHash != "" {
		if h, err := schemaHash(ch.input.Doc(), ch.output.Doc()); err == nil && h != d.SchemaHash {
			ch.add("schema_hash", fmt.Sprintf("states %s but the schemas hash to %s", d.SchemaHash, h), "remove schema_hash (it is computed) or correct it")
		}
	}
}

func docOf(s *schema.Schema) (map[string]any, bool) {
	if s == nil {
		return nil, false
	}
	m, ok := s.Doc().(map[string]any)
	return m, ok
}

// rootType answers the type of a schema's root: its one type, or its one
// type besides null (a Go slice derives ["null","array"]; the boundary
// renders a nil slice as [] anyway). "" when the root allows several.
func rootType(s *schema.Schema) string {
	m, _ := s.Doc().(map[string]any)
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		one := ""
		for _, x := range t {
			name, _ := x.(string)
			if name == "null" {
				continue
			}
			if one != "" {
				return ""
			}
			one = name
		}
		return one
	}
	return ""
}

func (ch *checker) binding() {
	d := ch.d
	h, r := d.Binding.Handler, d.Binding.Remote
	switch d.Kind {
	case toolplane.KindInternal, toolplane.KindVendor, toolplane.KindMCP:
	case "":
		ch.add("kind", "missing", "set kind to internal, vendor or mcp")
	default:
		ch.add("kind", fmt.Sprintf("%s is not a kind", quote(d.Kind)), "set kind to internal, vendor or mcp")
	}
	sides := ch.runtimes.Count(&d.Binding)
	for _, set := range []bool{h != nil, r != nil} {
		if set {
			sides++
		}
	}
	switch {
	case sides > 1:
		ch.add("binding", "names more than one of handler, remote, http and sql", "keep exactly one")
		return
	case sides == 0:
		ch.add("binding", "missing", "bind the tool: binding.handler.key for a registered handler, binding.remote for a tool on an MCP connection, or binding.http / binding.sql for a request the platform makes itself")
		return
	case h == nil && r == nil:
		ch.runtime()
		return
	}
	if d.Kind == toolplane.KindMCP && h != nil {
		ch.add("binding", "an mcp tool is bound to a handler", "bind it with binding.remote (connection_id and remote_name)")
	}
	if d.Kind != toolplane.KindMCP && d.Kind != "" && r != nil {
		ch.add("binding", fmt.Sprintf("a %s tool is bound to a remote tool", d.Kind), "set kind: mcp, or bind a handler")
	}
	if h != nil {
		switch {
		case !handlerKey.MatchString(h.Key):
			ch.add("binding.handler.key", fmt.Sprintf("%s is not a handler key", quote(h.Key)), "name a handler the deployment registers, such as payments.refund_order")
		case ch.b == nil:
			ch.unresolved("handler " + h.Key)
		default:
			found, preview := ch.b.Handler(h.Key)
			if !found {
				ch.add("binding.handler.key", fmt.Sprintf("no handler is registered as %s", quote(h.Key)), "register the handler in the deployment, or correct the key")
			} else if d.ApprovalPreview && !preview {
				ch.add("approval_preview", fmt.Sprintf("handler %s has no preview", quote(h.Key)), "implement the handler's preview, or set approval_preview: false")
			}
		}
	}
	if r != nil {
		if r.ConnectionID == "" {
			ch.add("binding.remote.connection_id", "missing", "name the connection the remote tool is served on")
		} else if ch.b == nil {
			ch.unresolved("connection " + r.ConnectionID)
		} else if !ch.b.Connection(r.ConnectionID) {
			ch.add("binding.remote.connection_id", fmt.Sprintf("no connection %s", quote(r.ConnectionID)), "register the connection first")
		}
		if r.RemoteName == "" {
			ch.add("binding.remote.remote_name", "missing", "name the tool as its server publishes it")
		}
		if d.ApprovalPreview {
			ch.add("approval_preview", "a remote tool has no handler to render a preview", "set approval_preview: false")
		}
	}
}

// runtime checks a tool one of the platform's runtimes runs (an HTTP
// request, a SQL statement), with the runtime's own checks: among them,
// that it declares the provider whose connection it goes through, since
// the broker releases that connection's secret per call.
func (ch *checker) runtime() {
	d := ch.d
	if d.Kind == toolplane.KindMCP {
		ch.add("binding", "an mcp tool is bound to an http or sql request", "set kind: internal or vendor, or bind it with binding.remote")
	}
	if d.ApprovalPreview {
		ch.add("approval_preview", "an http or sql tool has no handler to render a preview", "set approval_preview: false")
	}
	// The checks are the runtime's own, so what publishing accepts is
	// what the runtime can run.
	rt, _, _ := ch.runtimes.For(&d.Binding)
	for _, p := range rt.Check(d) {
		ch.add(p.Field, p.Message, p.Fix)
	}
}

func (ch *checker) effect() {
	d := ch.d
	switch d.Effect {
	case toolplane.EffectRead, toolplane.EffectWrite, toolplane.EffectSend:
	case "":
		ch.add("effect", "missing", "set effect to read, write or send")
		return
	default:
		ch.add("effect", fmt.Sprintf("%s is not an effect", quote(d.Effect)), "set effect to read, write or send")
		return
	}
	if d.Effect == toolplane.EffectSend && d.Connection == "" {
		ch.add("connection", "a send tool declares no connection", "name the provider connection the message goes out through")
	}
	if d.Effect.Writes() {
		switch {
		case d.Repeatable == nil:
			ch.add("repeatable", "a write or send tool must state repeatable: false", "add repeatable: false: two identical calls in one run are one effect (give a deliberate repeat a distinguishing argument)")
		case *d.Repeatable:
			ch.add("repeatable", "repeatable: true is refused", "set repeatable: false and give a deliberate repeat a distinguishing argument; the journal cannot tell a replay from a repeat")
		}
	} else {
		if d.Repeatable != nil {
			ch.add("repeatable", "a read takes no idempotency claim, so it states no repeatable", "remove repeatable")
		}
		if d.Annotations.Destructive {
			ch.add("annotations.destructive", "a read cannot be destructive", "set effect: write, or remove destructive")
		}
	}
	if d.Retry != "" && d.Retry != toolplane.RetryNone && d.Retry != toolplane.RetrySafe {
		ch.add("retry", fmt.Sprintf("%s is not a retry policy", quote(d.Retry)), "set retry to none or safe")
	}
	if d.Retry == toolplane.RetrySafe && d.Effect.Writes() {
		ch.add("retry", "retry: safe on a write or send", "a write is attempted again only when its downstream honours the idempotency key it is sent (an http idempotency_header, a handler bound WithKeyedDownstream) or its failures roll back (sql); set retry: none")
	}
	if d.Replay != nil {
		switch {
		case d.Replay.MaxAttempts < 1 || d.Replay.MaxAttempts > ch.c.MaxReplayAttempts:
			ch.add("replay.max_attempts", fmt.Sprintf("%d is outside 1..%d", d.Replay.MaxAttempts, ch.c.MaxReplayAttempts), fmt.Sprintf("choose 1 to %d attempts", ch.c.MaxReplayAttempts))
		case d.Effect.Writes() && !d.Annotations.Idempotent:
			ch.add("replay", "replay on a write that is not idempotent", "declare annotations.idempotent: true only when the handler passes the idempotency key downstream, or remove replay")
		}
	}
}

func (ch *checker) limits() {
	d := ch.d
	if d.MaxOutputBytes != 0 {
		switch {
		case d.MaxOutputBytes < 2:
			ch.add("max_output_bytes", fmt.Sprintf("%d is below 2 bytes", d.MaxOutputBytes), "use at least 2 ([] and {} need two bytes)")
		case d.MaxOutputBytes > ch.c.MaxOutputBytes:
			ch.add("max_output_bytes", fmt.Sprintf("%d exceeds the platform limit of %d", d.MaxOutputBytes, ch.c.MaxOutputBytes), fmt.Sprintf("use at most %d; a tool can lower the limit, never raise it", ch.c.MaxOutputBytes))
		}
	}
	if d.MaxResults != 0 {
		switch {
		case d.MaxResults < 0:
			ch.add("max_results", fmt.Sprintf("%d is not positive", d.MaxResults), "use a positive count")
		case d.MaxResults > ch.c.MaxResults:
			ch.add("max_results", fmt.Sprintf("%d exceeds the platform limit of %d", d.MaxResults, ch.c.MaxResults), fmt.Sprintf("use at most %d", ch.c.MaxResults))
		}
		if ch.output != nil && rootType(ch.output) != "array" {
			ch.add("max_results", "the output is not an array", "remove max_results, or make the output schema's root type: array")
		}
	}
}

// price checks a declared price's form and bounds; where its Field can
// point is the runtime's to check (its Check), which knows the answer's
// shape.
func (ch *checker) price() {
	d, p := ch.d, ch.d.Price
	if p == nil {
		return
	}
	if !d.Binding.Platform() {
		ch.add("price", "a price on a tool that is not an http or sql tool", "a handler reports what its call cost (handler.ReportUsage); remove price")
	}
	if !d.Metered {
		ch.add("metered", "a priced tool that is not metered", "set metered: true, so its calls pass accrual and write usage rows")
	}
	switch {
	case p.Field == "" && p.MaxCents != 0:
		ch.add("price.max_cents", "max_cents without a field to bound", "remove max_cents, or name the answer's field the price is read from")
	case p.Field == "" && (p.Cents < 0 || p.Cents > toolplane.MaxPriceCents):
		ch.add("price.cents", fmt.Sprintf("%d is outside 0..%d cents", p.Cents, toolplane.MaxPriceCents), fmt.Sprintf("state the price of one call in cents, at most %d", toolplane.MaxPriceCents))
	case p.Field == "" && p.Cents == 0:
		ch.add("price", "a price of nothing", "state cents, or a field the answer states its cost in; or remove price")
	case p.Field != "" && p.Cents != 0:
		ch.add("price.cents", "both a fixed price and a field", "keep one: cents for a fixed price, or field with max_cents")
	case p.Field != "" && (p.MaxCents < 1 || p.MaxCents > toolplane.MaxPriceCents):
		ch.add("price.max_cents", fmt.Sprintf("%d is outside 1..%d cents", p.MaxCents, toolplane.MaxPriceCents), "bound the price the answer may state: the most one call can cost, in cents")
	}
}

func (ch *checker) batch() {
	d := ch.d
	switch {
	case d.BatchArgument == "" && d.MaxBatchSize == 0:
		return
	case d.BatchArgument == "":
		ch.add("batch_argument", "max_batch_size without batch_argument", "name the top-level array argument max_batch_size bounds, or remove max_batch_size")
		return
	case d.MaxBatchSize == 0:
		ch.add("max_batch_size", "batch_argument without max_batch_size", "set max_batch_size, or remove batch_argument")
		return
	case d.MaxBatchSize < 0:
		ch.add("max_batch_size", fmt.Sprintf("%d is not positive", d.MaxBatchSize), "use a positive count")
	case d.MaxBatchSize > ch.c.MaxBatchSize:
		ch.add("max_batch_size", fmt.Sprintf("%d exceeds the platform limit of %d", d.MaxBatchSize, ch.c.MaxBatchSize), fmt.Sprintf("use at most %d", ch.c.MaxBatchSize))
	}
	if ch.input == nil {
		return
	}
	m, _ := ch.input.Doc().(map[string]any)
	props, _ := m["properties"].(map[string]any)
	p, _ := props[d.BatchArgument].(map[string]any)
	if p == nil {
		ch.add("batch_argument", fmt.Sprintf("%s is not a top-level property of input_schema", quote(d.BatchArgument)), "name a top-level array property")
		return
	}
	if t, _ := p["type"].(string); t != "array" {
		ch.add("batch_argument", fmt.Sprintf("%s is not declared type: array", quote(d.BatchArgument)), "name a top-level property declared {\"type\": \"array\"}")
	}
}

func (ch *checker) facts() {
	d := ch.d
	if len(d.PolicyFacts) > ch.c.MaxPolicyFacts {
		ch.add("policy_facts", fmt.Sprintf("%d facts, the limit is %d", len(d.PolicyFacts), ch.c.MaxPolicyFacts), "declare only the facts a rule reads")
	}
	seen := map[string]bool{}
	for _, f := range d.PolicyFacts {
		field := "policy_facts." + f
		switch {
		case reservedFacts[f]:
			ch.add(field, fmt.Sprintf("%s is reserved: a policy reads it directly", quote(f)), "remove it from policy_facts")
		case !factRE.MatchString(f):
			ch.add(field, fmt.Sprintf("%s is not a fact name", quote(f)), "use lowercase letters, digits and underscores")
		case seen[f]:
			ch.add(field, "listed twice", "list each fact once")
		case ch.b == nil:
			ch.unresolved("fact " + f)
		case !ch.b.FactResolver(f):
			ch.add(field, fmt.Sprintf("no resolver is registered for %s", quote(f)), "register a resolver for the fact in the deployment, or remove it")
		}
		seen[f] = true
	}
}

func (ch *checker) execution() {
	d := ch.d
	switch d.Mode {
	case "", toolplane.ModeSync, toolplane.ModeAsync:
	default:
		ch.add("mode", fmt.Sprintf("%s is not a mode", quote(d.Mode)), "set mode to sync or async")
	}
	if d.Annotations.LongRunning && d.Mode != toolplane.ModeAsync {
		ch.add("mode", "a long-running tool must run async", "set mode: async, or remove annotations.long_running")
	}
	t := d.Timeout.Std()
	limit := ch.c.MaxSyncTimeout
	if d.Mode == toolplane.ModeAsync {
		limit = ch.c.MaxAsyncTimeout
	}
	switch {
	case t < 0:
		ch.add("timeout", fmt.Sprintf("%v is negative", t), "use a positive duration such as 10s, or omit it for the default")
	case t > 0 && t < time.Millisecond:
		ch.add("timeout", fmt.Sprintf("%v is under 1ms", t), "use at least 1ms")
	case t > limit:
		ch.add("timeout", fmt.Sprintf("%v exceeds the %s step budget of %v", t, modeName(d.Mode), limit), fmt.Sprintf("use at most %v, or run the tool async", limit))
	}
}

func modeName(m toolplane.Mode) string {
	if m == "" {
		return string(toolplane.ModeSync)
	}
	return string(m)
}

// Bounds of an approval's wait.
const (
	minApprovalTTL = time.Minute
	maxApprovalTTL = 7 * 24 * time.Hour
)

var groupRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)

func (ch *checker) approval() {
	p := ch.d.Approval
	if p == nil {
		return
	}
	switch p.OnTimeout {
	case "", toolplane.OnTimeoutDeny:
	case toolplane.OnTimeoutEscalate:
		if len(p.Chain) < 2 {
			ch.add("approval.chain", "on_timeout: escalate needs a next group to escalate to", "list at least two approver groups, in order, or set on_timeout: deny")
		}
	default:
		ch.add("approval.on_timeout", fmt.Sprintf("%s is not a default", quote(p.OnTimeout)), "set on_timeout to deny or escalate")
	}
	seen := map[string]bool{}
	for _, g := range p.Chain {
		switch {
		case !groupRE.MatchString(g):
			ch.add("approval.chain", fmt.Sprintf("%s is not a group name", quote(g)), "name approver groups with letters, digits, '_', '.', ':' or '-'")
		case seen[g]:
			ch.add("approval.chain", fmt.Sprintf("%s is listed twice", quote(g)), "list each group once; escalation moves to a different group")
		}
		seen[g] = true
	}
	if t := p.TTL.Std(); t != 0 && (t < minApprovalTTL || t > maxApprovalTTL) {
		ch.add("approval.ttl", fmt.Sprintf("%v is outside %v..%v", t, minApprovalTTL, maxApprovalTTL), "choose a wait between one minute and seven days")
	}
}
