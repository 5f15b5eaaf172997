package registry

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/internal/jsondec"
	"github.com/toolplane/toolplane/modelname"
	"github.com/toolplane/toolplane/schema"
	"github.com/toolplane/toolplane/semver"
)

// Tool is a checked definition with its compiled schemas: the form every
// later step (validation, the boundary, projections) reads.
type Tool struct {
	Def toolplane.Definition
	// Model is the model-facing name.
	Model string
	// State is the version's lifecycle state: active for built-in and
	// ingested tools, active or deprecated for published versions (no
	// other state is ever in the registry).
	State toolplane.VersionState
	// SunsetAt and Replacement describe a deprecated version: its
	// earliest retirement, and what its callers should move to, a
	// reference "name@range" or "name" (see Version.Replacement).
	SunsetAt    time.Time
	Replacement string
	// Raised lists the fields of a published version the platform's
	// declaration of its binding raised (see Floor): Def is what is
	// served and enforced, stricter than what was published.
	Raised []string
	// published is a published version's definition as published, before
	// any floor; nil for built-in and ingested tools.
	published *toolplane.Definition
	version   semver.Version
	input     *schema.Schema
	output    *schema.Schema
	spec      boundary.Spec
}

// Registry holds tools that passed every registration check. Its
// catalogue can change while it serves (tools ingested from MCP servers
// come and go): readers see one consistent catalogue per lookup, swapped
// atomically, and a change is announced to watchers.
//
// The catalogue has two scopes. The platform's tools (those given to
// Build, and groups set without an organization: tools ingested from the
// upstreams the operator configures) are served to every organization.
// A published version belongs to its organization (Version.Organization)
// and is served to that organization alone, so two organizations hold one
// name independently. Every lookup names the caller's organization and
// answers from that organization's view: the platform's tools and its
// own. Where an organization's own tool and a platform tool would share a
// name (platform or model-facing), the organization's own is kept in its
// view and the platform tool withheld from it, so a tool an organization
// calls never turns into another's under the same name.
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
	// platform is the view of an organization with no tools of its own.
	platform *view
	// orgs holds the view of each organization with tools of its own.
	orgs map[string]*view
	// entries are the tools as set, by scope ("" for the platform's, else
	// the organization's) and name: what the views are built from.
	entries map[string]map[string]*entry
	// versioned marks the groups of published versions (SetVersions');
	// the others (Build's, SetGroup's) are the platform's own tools.
	versioned map[string]bool
	// floors are the platform's declarations of what its tools bind,
	// by BindingRef.
	floors map[string]*Floor
}

// entry is one name's tools in one scope: every callable version, oldest
// first, and the group they were set in ("" for Build's).
type entry struct {
	group    string
	versions []*Tool
}

// view is what one organization is served.
type view struct {
	// tools holds each name's default version: the newest active one, or
	// the newest deprecated one when none is active.
	tools  map[string]*Tool
	names  *modelname.Map
	sorted []*Tool
	// versions holds every callable version of each name, oldest first.
	versions map[string][]*Tool
	// group names the group each tool was added in ("" for Build's).
	group map[string]string
}

// view answers the view of org.
func (c *catalogue) view(org string) *view {
	if v, ok := c.orgs[org]; ok {
		return v
	}
	return c.platform
}

// Build checks defs and, when all pass, answers the registry of them: the
// platform's tools, served to every organization. The error is a
// *CheckError listing every problem. Each definition's SchemaHash is
// filled in when the file left it out.
func Build(defs []toolplane.Definition, opt Options) (*Registry, Report, error) {
	cs, _, rep, err := check(defs, opt)
	if err != nil {
		return nil, rep, err
	}
	platform := make(map[string]*entry, len(cs))
	for _, c := range cs {
		t, err := newTool(c)
		if err != nil {
			return nil, rep, err
		}
		platform[t.Def.Name] = &entry{versions: []*Tool{t}}
	}
	cat, _ := assemble(map[string]map[string]*entry{"": platform}, nil)
	r := &Registry{opt: opt}
	r.state.Store(cat)
	return r, rep, nil
}

// assemble answers the catalogue of entries: the platform's view, and each
// organization's, with the problems of the platform tools withheld from
// an organization because its own tools hold their names. Every published
// version (of a versioned group) is served held to the floor of what it
// binds, computed anew: any change may move a floor.
func assemble(entries map[string]map[string]*entry, versioned map[string]bool) (*catalogue, []Problem) {
	cat := &catalogue{entries: entries, orgs: map[string]*view{}, versioned: versioned}
	cat.hold()
	platform := entries[""]
	cat.platform, _ = newView(platform, nil, "")
	var problems []Problem
	for org, own := range entries {
		if org == "" || len(own) == 0 {
			continue
		}
		var ps []Problem
		cat.orgs[org], ps = newView(platform, own, org)
		problems = append(problems, ps...)
	}
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Tool < problems[j].Tool })
	return cat, problems
}

// newView answers the view of the platform's entries and an
// organization's own (none for the platform's view). Each set was checked
// on its own; a platform tool whose platform or model-facing name one of
// the organization's own tools holds is left out, and reported.
func newView(platform, own map[string]*entry, org string) (*view, []Problem) {
	v := &view{tools: make(map[string]*Tool, len(platform)+len(own)), group: make(map[string]string, len(platform)+len(own)),
		versions: make(map[string][]*Tool, len(platform)+len(own))}
	add := func(name string, e *entry) {
		v.versions[name] = e.versions
		v.group[name] = e.group
		v.tools[name] = defaultVersion(e.versions)
	}
	models := make(map[string]string, len(own))
	for name, e := range own {
		add(name, e)
		models[modelname.Derive(name)] = name
	}
	var problems []Problem
	for name, e := range platform {
		if mine, taken := models[modelname.Derive(name)]; taken {
			problems = append(problems, Problem{Tool: name, Field: "name", Fix: "rename one of them",
				Message: fmt.Sprintf("not served to organization %s, whose own published tool %s holds the name", org, mine)})
			continue
		}
		add(name, e)
	}
	names := make([]string, 0, len(v.tools))
	for name, t := range v.tools {
		names = append(names, name)
		v.sorted = append(v.sorted, t)
	}
	sortTools(v.sorted)
	// Every name was checked against the others of its scope, and across
	// scopes by model-facing name above, so the map is whole.
	v.names, _ = modelname.New(names)
	if v.names == nil {
		v.names, _ = modelname.New(nil)
	}
	return v, problems
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
		if d.Binding.HTTP != nil && !d.Writes() {
			// A read the platform makes itself is safe to repeat within
			// its deadline; `retry: none` keeps it to one attempt.
			d.Retry = toolplane.RetrySafe
		}
	}
	t := &Tool{Def: d, Model: modelname.Derive(d.Name), State: toolplane.StateActive, input: c.input, output: c.output}
	t.spec = t.boundarySpec()
	// The checks refused any version that is not semantic.
	t.version, _ = semver.Parse(d.Version)
	return t, nil
}

func sortTools(ts []*Tool) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Def.Name < ts[j].Def.Name })
}

// SetGroup replaces the tools of one named group of the platform's (the
// tools ingested from one MCP server, say) with defs, leaving every other
// tool as it is. Each definition is checked on its own against every
// platform tool outside the group: one that fails, or collides with a
// tool already registered (by platform or model-facing name), is refused
// and reported, never shadowing the other, while the rest of the group is
// still accepted. Group "" is the tools given to Build and cannot be
// replaced. Watchers are told when the catalogue changed.
func (r *Registry) SetGroup(group string, defs []toolplane.Definition) []Problem {
	vs := make([]Version, len(defs))
	for i, d := range defs {
		vs[i] = Version{Def: d, State: toolplane.StateActive}
	}
	return r.setGroup(group, vs, false)
}

// Version is one published version of a tool, as SetVersions takes it.
type Version struct {
	// Organization is the organization the version is published in and
	// served to; "" serves it to every organization, as a platform tool.
	Organization string
	Def          toolplane.Definition
	State        toolplane.VersionState
	SunsetAt     time.Time
	// Replacement is what a deprecated version's callers should move to:
	// a reference "name@range" or "name" (any version), or a bare version
	// of this tool, as versions deprecated before a replacement could name
	// another tool hold it (read as "name@version").
	Replacement string
}

// SetVersions replaces the tools of one group, in every organization,
// with published versions: several versions of one name may stand side by
// side (a new major beside the old one), each checked like SetGroup's
// definitions against the other tools of its own organization (or of the
// platform, for a version without one). Only active and deprecated
// versions are taken; others are skipped, since they are neither shown
// nor called.
func (r *Registry) SetVersions(group string, vs []Version) []Problem {
	callable := vs[:0:0]
	for _, v := range vs {
		if v.State.Callable() {
			callable = append(callable, v)
		}
	}
	return r.setGroup(group, callable, true)
}

func (r *Registry) setGroup(group string, vs []Version, versioned bool) []Problem {
	if group == "" {
		return []Problem{{Tool: "(group)", Field: "group", Message: "the built-in catalogue cannot be replaced", Fix: "name the group"}}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.state.Load()
	groups := map[string]bool{group: versioned}
	for g, v := range cur.versioned {
		if g != group {
			groups[g] = v
		}
	}
	// Every scope's entries but the group's, and the names each scope
	// holds outside the group: what a version is checked against.
	entries := make(map[string]map[string]*entry, len(cur.entries))
	registered := make(map[string][]string, len(cur.entries))
	for scope, es := range cur.entries {
		next := make(map[string]*entry, len(es))
		for name, e := range es {
			if e.group == group {
				continue
			}
			next[name] = e
			registered[scope] = append(registered[scope], name)
		}
		entries[scope] = next
	}
	var problems []Problem
	opt := r.opt
	for _, v := range vs {
		d, scope := v.Def, v.Organization
		es := entries[scope]
		if es == nil {
			es = map[string]*entry{}
			entries[scope] = es
		}
		opt.Registered = registered[scope]
		prev := es[d.Name]
		if versioned && prev != nil && prev.group == group {
			// Another version of a name this group already holds.
			opt.Registered = without(registered[scope], d.Name)
		}
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
		t.State, t.SunsetAt, t.Replacement = v.State, v.SunsetAt, replacementRef(d.Name, v.Replacement)
		if versioned {
			own := t.Def
			t.published = &own
		}
		if prev == nil || prev.group != group {
			registered[scope] = append(registered[scope], d.Name)
			es[d.Name] = &entry{group: group, versions: []*Tool{t}}
			continue
		}
		if findVersion(prev.versions, t.version) != nil {
			problems = append(problems, Problem{Tool: d.Name, Field: "version", Message: fmt.Sprintf("version %s is given twice", d.Version)})
			continue
		}
		// A new entry, never an edit of one a published catalogue holds.
		ts := append(append([]*Tool(nil), prev.versions...), t)
		sort.Slice(ts, func(i, j int) bool { return semver.Compare(ts[i].version, ts[j].version) < 0 })
		es[d.Name] = &entry{group: group, versions: ts}
	}
	next, withheld := assemble(entries, groups)
	problems = append(problems, withheld...)
	changed := !sameCatalogue(cur, next)
	r.state.Store(next)
	if changed {
		r.notify()
	}
	return problems
}

// replacementRef answers a version's replacement as a reference: a bare
// version is a version of the tool itself.
func replacementRef(name, replacement string) string {
	if replacement == "" || strings.Contains(replacement, "@") {
		return replacement
	}
	if _, err := semver.Parse(replacement); err == nil {
		return name + "@" + replacement
	}
	return replacement
}

func without(names []string, name string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != name {
			out = append(out, n)
		}
	}
	return out
}

func findVersion(ts []*Tool, v semver.Version) *Tool {
	for _, t := range ts {
		if semver.Compare(t.version, v) == 0 {
			return t
		}
	}
	return nil
}

// defaultVersion is the version a caller with no pin is given: the newest
// active one, or the newest deprecated one when none is active. ts is
// sorted oldest first.
func defaultVersion(ts []*Tool) *Tool {
	for i := len(ts) - 1; i >= 0; i-- {
		if ts[i].State == toolplane.StateActive {
			return ts[i]
		}
	}
	return ts[len(ts)-1]
}

// Versions answers every callable version of a name org is served, oldest
// first.
func (r *Registry) Versions(org, name string) []*Tool {
	return r.state.Load().view(org).versions[name]
}

// Sensitive answers the JSON pointers of the arguments that version of
// org's tool name marks x-sensitive (see schema.Schema.Sensitive), or the
// served version's when that one is no longer served; nil when the tool
// is not served at all (a nil Registry serves nothing). A page showing a
// call's stored arguments masks these.
func (r *Registry) Sensitive(org, name, version string) []string {
	if r == nil {
		return nil
	}
	for _, t := range r.Versions(org, name) {
		if t.Def.Version == version && t.input != nil {
			return t.input.Sensitive()
		}
	}
	if t, ok := r.Get(org, name); ok && t.input != nil {
		return t.input.Sensitive()
	}
	return nil
}

// Resolve answers the version of name that a caller of org pinned to a
// range ("^2.1.0", "~2.1.0", "2.1.0"; "" or "*" for any) is given: the
// newest active version the range contains, or the newest deprecated one
// when no active one is.
func (r *Registry) Resolve(org, name, rng string) (*Tool, bool) {
	v := r.state.Load().view(org)
	if rng == "" || rng == "*" {
		t, ok := v.tools[name]
		return t, ok
	}
	want, err := semver.ParseRange(rng)
	if err != nil {
		return nil, false
	}
	// Newest first: the first active version the range holds, else the
	// newest one it holds at all.
	var newest *Tool
	vs := v.versions[name]
	for i := len(vs) - 1; i >= 0; i-- {
		t := vs[i]
		if !want.Contains(t.version) {
			continue
		}
		if t.State == toolplane.StateActive {
			return t, true
		}
		if newest == nil {
			newest = t
		}
	}
	return newest, newest != nil
}

// GroupOf answers the group a tool name org is served belongs to ("" for
// Build's).
func (r *Registry) GroupOf(org, name string) string { return r.state.Load().view(org).group[name] }

// sameCatalogue reports whether every organization is served the same
// tools in a as in b.
func sameCatalogue(a, b *catalogue) bool {
	if len(a.orgs) != len(b.orgs) || !sameTools(a.platform, b.platform) {
		return false
	}
	for org, v := range a.orgs {
		w, ok := b.orgs[org]
		if !ok || !sameTools(v, w) {
			return false
		}
	}
	return true
}

// sameTools reports whether two views hold the same tools at the same
// versions and contracts.
func sameTools(a, b *view) bool {
	if len(a.sorted) != len(b.sorted) {
		return false
	}
	for i, t := range a.sorted {
		u := b.sorted[i]
		if !sameTool(t, u) || len(a.versions[t.Def.Name]) != len(b.versions[u.Def.Name]) {
			return false
		}
		for j, v := range a.versions[t.Def.Name] {
			if !sameTool(v, b.versions[u.Def.Name][j]) {
				return false
			}
		}
	}
	return true
}

func sameTool(t, u *Tool) bool {
	return t.Def.Name == u.Def.Name && t.Def.Version == u.Def.Version && t.Def.SchemaHash == u.Def.SchemaHash &&
		t.Def.Description == u.Def.Description && t.Def.Effect == u.Def.Effect && t.Def.Annotations == u.Def.Annotations &&
		t.State == u.State && t.SunsetAt.Equal(u.SunsetAt) && t.Replacement == u.Replacement &&
		// What search reads and shows of a tool.
		t.Def.Title == u.Def.Title && slices.Equal(t.Def.Tags, u.Def.Tags) && slices.Equal(t.Def.SearchHints, u.Def.SearchHints) &&
		slices.Equal(t.Def.Dependencies, u.Def.Dependencies) && t.Def.Owner == u.Def.Owner && t.Def.Classification == u.Def.Classification
}

// Watch calls fn after every change to the catalogue, in any
// organization, until stop is called. fn runs on the goroutine that made
// the change and must not block.
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

// Get answers the tool with a platform name that org is served, at its
// default version.
func (r *Registry) Get(org, name string) (*Tool, bool) {
	t, ok := r.state.Load().view(org).tools[name]
	return t, ok
}

// ByModelName answers the tool of org a model called by its model-facing
// name.
func (r *Registry) ByModelName(org, model string) (*Tool, bool) {
	v := r.state.Load().view(org)
	name, ok := v.names.Platform(model)
	if !ok {
		return nil, false
	}
	t, ok := v.tools[name]
	return t, ok
}

// Tools answers every tool org is served, sorted by platform name. The
// slice is a snapshot: it does not change when the catalogue does.
func (r *Registry) Tools(org string) []*Tool { return r.state.Load().view(org).sorted }

// Platform answers the platform's own tools (built-in and ingested, never
// a published version), sorted by name: those served to every
// organization, whose namespaces and bindings publishers may not take
// over.
func (r *Registry) Platform() []*Tool {
	cat := r.state.Load()
	out := make([]*Tool, 0, len(cat.platform.sorted))
	for _, t := range cat.platform.sorted {
		if !cat.versioned[cat.platform.group[t.Def.Name]] {
			out = append(out, t)
		}
	}
	return out
}

// argumentDecoders decode argument texts as jsonschema.UnmarshalJSON does
// (numbers as json.Number, one value and only white space after it), with
// the same errors, reusing their decoders from one call to the next.
var argumentDecoders = jsondec.New(jsondec.Options{UseNumber: true})

// DecodeArguments reads a JSON argument text the way validation expects it
// (numbers kept exact). Invalid JSON answers an invalid_input result.
func DecodeArguments(raw []byte) (any, *toolplane.Result) {
	if v, ok := jsondec.Value(raw); ok {
		return v, nil
	}
	// Not JSON: encoding/json says where, in the words the caller reads.
	var v any
	if err := argumentDecoders.DecodeOnly(raw, &v); err != nil {
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

// Chunk answers a piece of partial output t's handler emitted while its
// call ran (handler.Emit), through the result boundary as t's answers go:
// redacted, outside text fenced, labelled untrusted when t's answers
// come from outside, and bounded to limit bytes (never beyond t's own
// bound; zero or less means t's bound). A chunk is not checked against
// the output schema: it is a part of an answer, not the answer, and
// max_results, a bound on the answer's items, does not apply to it.
//
// Nor can the output schema's outside-text fields be found in a chunk:
// a chunk has any shape (an item, a field, a progress line) at no known
// place in the answer. So when t's answers carry outside text, every
// string of a chunk is fenced as such (boundary.Spec.Partial).
func (t *Tool) Chunk(out any, limit int) (any, toolplane.Meta) {
	spec := t.spec
	spec.MaxResults = 0
	spec.Partial = true
	if own := boundary.Limit(spec.MaxOutputBytes); limit <= 0 || limit > own {
		limit = own
	}
	spec.MaxOutputBytes = limit
	return boundary.Apply(out, spec)
}

// boundarySpec answers what the result boundary is told of t's answers:
// its definition's bounds and label, and the fields its output schema
// marks x-outside-text, which are fenced, and make the whole answer
// labelled untrusted, whatever runs the tool.
func (t *Tool) boundarySpec() boundary.Spec {
	spec := boundary.SpecFor(&t.Def)
	if t.output != nil {
		if outside := t.output.OutsideText(); len(outside) > 0 {
			spec.OutsideText, spec.Source, spec.Untrusted = outside, t.Def.Name, true
		}
	}
	return spec
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

// Every answers every callable version the registry serves, in any
// organization's view, each once: what a read model of the whole
// catalogue (discovery's index) is kept current from. It is the
// deployment's own read, never an answer to an organization.
func (r *Registry) Every() []*Tool {
	cat := r.state.Load()
	seen := map[*Tool]bool{}
	var out []*Tool
	add := func(v *view) {
		for _, vs := range v.versions {
			for _, t := range vs {
				if !seen[t] {
					seen[t] = true
					out = append(out, t)
				}
			}
		}
	}
	add(cat.platform)
	for _, v := range cat.orgs {
		add(v)
	}
	return out
}
