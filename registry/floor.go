package registry

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/schema"
)

// Floor is the platform's own declaration of one binding (a handler key or
// a remote tool): what the built-in and ingested tools bound to it
// declare. A published definition bound to the same thing keeps at least
// all of it (ARCHITECTURE invariant 9), so renaming a guarded handler, or
// binding an ingested remote tool under another name, never sheds its
// approval. When several platform tools declare one binding, the strictest
// of their declarations counts.
//
// Published versions do not declare floors: a handler that only published
// definitions bind has no platform declaration, and each published
// definition is then the whole contract of its own tool.
type Floor struct {
	// Binding names what is bound: "handler demo.refund_order" or
	// "remote web/structured".
	Binding string
	// Declared names the platform tools the floor comes from.
	Declared []string
	// Effect is the strongest effect declared (send over write over read).
	Effect toolplane.Effect
	// Connection is the provider connection a send declares.
	Connection       string
	Destructive      bool
	RequiresApproval bool
	// Untrusted: a declaring tool's answers come from outside the platform
	// (vendor, MCP or open-world), so they are labelled untrusted.
	Untrusted bool
	// OutsideText is every field a declaring tool's output schema marks
	// x-outside-text, sorted: a definition bound to the same handler
	// answers the same text from outside, fenced and labelled wherever it
	// is published.
	OutsideText []string
	Metered     bool
	// Preview: a declaring tool has its approval line rendered by the
	// handler's preview, which reads the arguments as the handler does
	// and so refuses, before anyone is asked, what the handler cannot
	// hold. A definition bound to it that dropped the preview would file
	// approvals with a blank line for arguments the handler then refuses.
	Preview bool
	// Approval is the first declared approval policy (by tool name): who
	// answers is part of the guard, not a detail a publisher may change.
	Approval *toolplane.ApprovalPolicy
	// Replay is nil unless every declaring tool allows replay; then it is
	// the fewest attempts any of them allows.
	Replay *toolplane.Replay
	// Batches is the smallest max_batch_size declared, by batch argument:
	// the handler takes no more items in one call, whatever a definition
	// bound to it calls itself.
	Batches map[string]int
	// Facts is every policy fact a declaring tool names, sorted: policy
	// rules read them about a call of the binding, and a definition that
	// left one out would have those rules read it as absent.
	Facts []string
	// Default: no platform tool declares this remote binding (its server
	// lists it, but ingestion refused it, or it is not listed at all), so
	// the floor is ingestion's default for any remote tool (RemoteDefault):
	// a published definition never runs a remote tool weaker than the
	// platform would have ingested it.
	Default bool
}

// RemoteDefault sets on d what ingestion declares for a remote tool its
// owner relaxed nothing of: a destructive write needing approval, whose
// answers come from outside the platform. It is the one statement of that
// default: upstream ingests under it, and it is the floor of a remote tool
// no platform tool declares.
func RemoteDefault(d *toolplane.Definition) {
	d.Effect = toolplane.EffectWrite
	d.Annotations.Destructive = true
	d.Annotations.RequiresApproval = true
	d.Annotations.OpenWorld = true
}

// remoteDefaultName is what a default floor is declared by, as reviews
// and problems name it.
const remoteDefaultName = "ingestion's default for a remote tool"

// defaultFloor answers the floor of remote binding ref that no platform
// tool declares: ingestion's default.
func defaultFloor(ref string) *Floor {
	d := toolplane.Definition{Name: remoteDefaultName}
	RemoteDefault(&d)
	f := &Floor{Binding: ref, Default: true}
	f.declare(&d)
	return f
}

// floorOf answers the floor of what b executes under floors: the platform's
// declaration, else, for a remote tool, ingestion's default; nil for a
// handler no platform tool declares.
func floorOf(floors map[string]*Floor, b toolplane.Binding) *Floor {
	ref := BindingRef(b)
	if f := floors[ref]; f != nil {
		return f
	}
	if b.Remote != nil && ref != "" {
		return defaultFloor(ref)
	}
	return nil
}

// Guarded reports whether the binding needs a person: it is declared
// destructive or as requiring approval.
func (f *Floor) Guarded() bool { return f.Destructive || f.RequiresApproval }

// Why answers, for a review reason, what guards the binding.
func (f *Floor) Why() string {
	var w []string
	if f.Destructive {
		w = append(w, "destructive")
	}
	if f.RequiresApproval {
		w = append(w, "requires approval")
	}
	return strings.Join(w, ", ")
}

// BindingRef answers the identity of what a binding executes, as Floor
// names it; "" for an incomplete binding.
func BindingRef(b toolplane.Binding) string {
	switch {
	case b.Handler != nil && b.Handler.Key != "":
		return "handler " + b.Handler.Key
	case b.Remote != nil && b.Remote.ConnectionID != "" && b.Remote.RemoteName != "":
		return "remote " + b.Remote.ConnectionID + "/" + b.Remote.RemoteName
	}
	return ""
}

func effectRank(e toolplane.Effect) int {
	switch e {
	case toolplane.EffectSend:
		return 2
	case toolplane.EffectWrite:
		return 1
	}
	return 0
}

// declare adds one platform tool's declaration to the floor.
func (f *Floor) declare(d *toolplane.Definition) {
	first := len(f.Declared) == 0
	f.Declared = append(f.Declared, d.Name)
	if effectRank(d.Effect) > effectRank(f.Effect) || f.Effect == "" {
		f.Effect = d.Effect
	}
	if f.Connection == "" {
		f.Connection = d.Connection
	}
	f.Destructive = f.Destructive || d.Annotations.Destructive
	f.RequiresApproval = f.RequiresApproval || d.Annotations.RequiresApproval
	f.Untrusted = f.Untrusted || d.Untrusted()
	for _, p := range outsideText(d) {
		if !slices.Contains(f.OutsideText, p) {
			f.OutsideText = append(f.OutsideText, p)
		}
	}
	slices.Sort(f.OutsideText)
	f.Metered = f.Metered || d.Metered
	f.Preview = f.Preview || d.ApprovalPreview
	if f.Approval == nil && d.Approval != nil {
		f.Approval = cloneApproval(d.Approval)
	}
	if d.BatchArgument != "" {
		if f.Batches == nil {
			f.Batches = map[string]int{}
		}
		if limit, ok := f.Batches[d.BatchArgument]; !ok || d.MaxBatchSize < limit {
			f.Batches[d.BatchArgument] = d.MaxBatchSize
		}
	}
	for _, fact := range d.PolicyFacts {
		if !slices.Contains(f.Facts, fact) {
			f.Facts = append(f.Facts, fact)
		}
	}
	slices.Sort(f.Facts)
	switch {
	case first && d.Replay != nil:
		f.Replay = &toolplane.Replay{MaxAttempts: d.Replay.MaxAttempts}
	case d.Replay == nil:
		f.Replay = nil
	case f.Replay != nil && d.Replay.MaxAttempts < f.Replay.MaxAttempts:
		f.Replay.MaxAttempts = d.Replay.MaxAttempts
	}
}

// outsideText answers the fields d's output schema marks x-outside-text;
// none when it does not compile (the registration checks say why).
func outsideText(d *toolplane.Definition) []string {
	s, err := schema.Compile(d.OutputSchema)
	if err != nil {
		return nil
	}
	return s.OutsideText()
}

// unfencedText answers the fields of outside that d's output schema
// describes as text and does not mark x-outside-text: free text left
// unmarked, or marked the platform's own. A field it does not describe
// is fenced by the floor without a word (Tool.held): the schema says
// nothing to the contrary.
func unfencedText(outside []string, d *toolplane.Definition) []string {
	if len(outside) == 0 {
		return nil
	}
	s, err := schema.Compile(d.OutputSchema)
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range outside {
		if slices.Contains(s.FreeText(), p) || slices.Contains(s.OwnText(), p) {
			if p == "" {
				p = "the whole answer"
			}
			out = append(out, p)
		}
	}
	return out
}

// unmarked answers the fields of want that have is missing.
func unmarked(want, have []string) []string {
	var out []string
	for _, p := range want {
		if !slices.Contains(have, p) {
			out = append(out, p)
		}
	}
	return out
}

func cloneApproval(p *toolplane.ApprovalPolicy) *toolplane.ApprovalPolicy {
	c := *p
	c.Chain = slices.Clone(p.Chain)
	return &c
}

func sameApproval(a, b *toolplane.ApprovalPolicy) bool {
	if a == nil || b == nil {
		return a == b
	}
	onTimeout := func(s string) string {
		if s == "" {
			return toolplane.OnTimeoutDeny
		}
		return s
	}
	return slices.Equal(a.Chain, b.Chain) && onTimeout(a.OnTimeout) == onTimeout(b.OnTimeout) && a.TTL == b.TTL
}

// Hold answers d held to the floor, and a problem for every field in
// which d was weaker than the binding's declaration (none: d keeps all of
// it and is returned unchanged). Publishing refuses a definition with
// problems; the registry serves a stored one (published before the floor
// rose, say) held, so it never runs weaker either way.
func (f *Floor) Hold(d toolplane.Definition) (toolplane.Definition, []Problem) {
	var problems []Problem
	weaker := func(field, message, fix string) {
		problems = append(problems, Problem{Tool: d.Name, Field: field,
			Message: fmt.Sprintf("%s, weaker than %s as the platform declares it (%s)", message, f.Binding, strings.Join(f.Declared, ", ")),
			Fix:     fix + ": a definition never weakens what it binds"})
	}
	if f.Effect.Writes() && !d.Effect.Writes() {
		weaker("effect", fmt.Sprintf("%s where the binding is %s", d.Effect, f.Effect), "set effect: "+string(f.Effect)+" and repeatable: false")
		no := false
		d.Effect, d.Repeatable, d.Retry = f.Effect, &no, toolplane.RetryNone
		if d.Connection == "" {
			d.Connection = f.Connection
		}
	}
	if f.Connection != "" && d.Connection != f.Connection {
		// The binding's own calls go through its provider's connection
		// (a person's token, for an upstream bound to one): a definition
		// naming another, or none, would call it without.
		weaker("connection", fmt.Sprintf("connection %q where the binding goes through %q", d.Connection, f.Connection), "set connection: "+f.Connection)
		d.Connection = f.Connection
	}
	if f.Destructive && !d.Annotations.Destructive {
		weaker("annotations.destructive", "not destructive", "set annotations.destructive: true")
		d.Annotations.Destructive = true
	}
	if f.RequiresApproval && !d.Annotations.RequiresApproval {
		weaker("annotations.requires_approval", "needs no approval", "set annotations.requires_approval: true")
		d.Annotations.RequiresApproval = true
	}
	// Who approves is part of the guard: a definition naming its own
	// approvers (its own team, say) for a guarded binding is weaker even
	// when the binding names none (anyone the deployment lets approve).
	if (f.RequiresApproval || f.Approval != nil) && !sameApproval(d.Approval, f.Approval) {
		if f.Approval == nil {
			weaker("approval", "names its own approvers", "remove approval: the binding's approvals go to whoever the deployment lets approve")
			d.Approval = nil
		} else {
			weaker("approval", "names other approvers or waits", fmt.Sprintf("state the binding's approval (chain %v, on_timeout %q, ttl %v)", f.Approval.Chain, f.Approval.OnTimeout, f.Approval.TTL.Std()))
			d.Approval = cloneApproval(f.Approval)
		}
	}
	if f.Untrusted && !d.Untrusted() {
		weaker("annotations.open_world", "answers would not be labelled untrusted", "set annotations.open_world: true")
		d.Annotations.OpenWorld = true
	}
	if unfenced := unfencedText(f.OutsideText, &d); len(unfenced) > 0 {
		// The schema is the publisher's to change; the registry serves
		// the held tool with those fields fenced all the same (Tool.held).
		weaker("output_schema", "describes "+strings.Join(unfenced, ", ")+" as text of its own", "mark each "+strconv.Quote(schema.OutsideTextKeyword)+": true")
	}
	if f.Metered && !d.Metered {
		weaker("metered", "not metered", "set metered: true")
		d.Metered = true
	}
	if f.Preview && !d.ApprovalPreview {
		weaker("approval_preview", "files approvals without the handler's preview", "set approval_preview: true")
		d.ApprovalPreview = true
	}
	if d.Replay != nil && (f.Replay == nil || d.Replay.MaxAttempts > f.Replay.MaxAttempts) {
		if f.Replay == nil {
			weaker("replay", "replays a binding that is not declared safe to repeat", "remove replay")
			d.Replay = nil
		} else {
			weaker("replay.max_attempts", fmt.Sprintf("%d attempts where the binding allows %d", d.Replay.MaxAttempts, f.Replay.MaxAttempts), fmt.Sprintf("allow at most %d", f.Replay.MaxAttempts))
			d.Replay = &toolplane.Replay{MaxAttempts: f.Replay.MaxAttempts}
		}
	}
	if len(f.Batches) > 0 {
		limit, ok := f.Batches[d.BatchArgument]
		switch {
		case !ok:
			// A definition states one batch limit: where the binding
			// declares several, the first by argument name is held.
			args := slices.Sorted(maps.Keys(f.Batches))
			what := "bounds no batch"
			if d.BatchArgument != "" {
				what = "bounds batch argument " + d.BatchArgument
			}
			weaker("batch_argument", fmt.Sprintf("%s where the binding bounds %s at %d", what, args[0], f.Batches[args[0]]),
				fmt.Sprintf("set batch_argument: %s and max_batch_size: %d", args[0], f.Batches[args[0]]))
			d.BatchArgument, d.MaxBatchSize = args[0], f.Batches[args[0]]
		case d.MaxBatchSize > limit:
			weaker("max_batch_size", fmt.Sprintf("%d items of %s per call where the binding takes %d", d.MaxBatchSize, d.BatchArgument, limit),
				fmt.Sprintf("set max_batch_size: %d or less", limit))
			d.MaxBatchSize = limit
		}
	}
	var missing []string
	for _, fact := range f.Facts {
		if !slices.Contains(d.PolicyFacts, fact) {
			missing = append(missing, fact)
		}
	}
	if len(missing) > 0 {
		weaker("policy_facts", fmt.Sprintf("leaves out policy facts %s", strings.Join(missing, ", ")), "add "+strings.Join(missing, ", ")+" to policy_facts")
		d.PolicyFacts = append(slices.Clone(d.PolicyFacts), missing...)
	}
	return d, problems
}

// Floor answers the platform's declaration of what b executes, when a
// built-in or ingested tool declares it. A remote tool no platform tool
// declares answers ingestion's default (Floor.Default): a server may list
// tools ingestion refused, and a definition binding one is held as
// strictly as an ingested one would be.
func (r *Registry) Floor(b toolplane.Binding) (*Floor, bool) {
	f := floorOf(r.state.Load().floors, b)
	return f, f != nil
}

// floorsOf answers the floors the platform's own tools declare: every
// platform-scope tool outside the published (versioned) groups.
func floorsOf(platform map[string]*entry, versioned map[string]bool) map[string]*Floor {
	// By name, so the first approval policy declared is always the same.
	names := make([]string, 0, len(platform))
	for name, e := range platform {
		if !versioned[e.group] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	floors := map[string]*Floor{}
	for _, name := range names {
		for _, v := range platform[name].versions {
			ref := BindingRef(v.Def.Binding)
			if ref == "" {
				continue
			}
			f := floors[ref]
			if f == nil {
				f = &Floor{Binding: ref}
				floors[ref] = f
			}
			f.declare(&v.Def)
		}
	}
	return floors
}

// hold computes the catalogue's floors and serves every published version
// held to the floor of what it binds, from the definition as published:
// a floor that rose (an upstream re-ingested with approval) raises the
// versions bound to it, and one that fell lets them be as published again.
// Entries are replaced, never edited: the previous catalogue may share
// them.
func (cat *catalogue) hold() {
	cat.floors = floorsOf(cat.entries[""], cat.versioned)
	for _, es := range cat.entries {
		for name, e := range es {
			if !cat.versioned[e.group] {
				continue
			}
			var held []*Tool
			for i, t := range e.versions {
				nt := t.held(cat.floors)
				if nt == t {
					continue
				}
				if held == nil {
					held = slices.Clone(e.versions)
				}
				held[i] = nt
			}
			if held != nil {
				es[name] = &entry{group: e.group, versions: held}
			}
		}
	}
}

// held answers t served under floors: t itself when nothing changes, or a
// copy with the held definition.
func (t *Tool) held(floors map[string]*Floor) *Tool {
	own := t.Def
	if t.published != nil {
		own = *t.published
	}
	f := floorOf(floors, own.Binding)
	var d toolplane.Definition
	var problems []Problem
	if f != nil {
		d, problems = f.Hold(own)
	}
	// The fields its answers are fenced at: its own schema's marks, and
	// the floor's (output schemas are not raised, answers are).
	var fence []string
	if t.output != nil {
		fence = t.output.OutsideText()
	}
	if f != nil && len(unmarked(f.OutsideText, fence)) > 0 {
		fence = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(fence), f.OutsideText...))))
	}
	if len(problems) == 0 && len(t.Raised) == 0 && slices.Equal(fence, t.spec.OutsideText) {
		return t
	}
	if len(problems) == 0 {
		d = own
	}
	nt := *t
	nt.published = &own
	nt.Def = d
	nt.Raised = nt.Raised[:0:0]
	for _, p := range problems {
		nt.Raised = append(nt.Raised, p.Field)
	}
	nt.spec = nt.boundarySpec()
	if len(fence) > len(nt.spec.OutsideText) {
		nt.spec.OutsideText, nt.spec.Source, nt.spec.Untrusted = fence, nt.Def.Name, true
	}
	return &nt
}
