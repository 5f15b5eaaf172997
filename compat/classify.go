package compat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/registry"
)

// Report is everything that changed between two versions of a definition.
type Report struct {
	// Required is the smallest bump that allows every change: PATCH when
	// nothing but documentation changed, or nothing at all.
	Required Bump `json:"required"`
	// Changes lists input, then output, then error schema changes, then
	// definition metadata, each group sorted by path.
	Changes []Change `json:"changes"`
}

// Classify compares two versions of one tool: its input, output and error
// schemas with Diff, and its metadata field by field. It does not look at
// the versions themselves; Check does.
//
// Metadata falls in three classes. Text that only informs (description,
// tags, owner, on-call, cost centre, the approval preview, a longer
// timeout) needs PATCH. Operational settings a caller cannot observe
// through the contract (handler key, retry, idempotent, a shorter timeout,
// result and byte bounds, approval wait, a new policy fact) need MINOR.
// Anything that changes what a call does to the world, who executes it, or
// which human checks guard it (effect, kind, remote binding, destructive,
// requires_approval, long_running, mode, repeatable, approvers and what an
// unanswered approval means) needs MAJOR, because the registry hands a
// MINOR to every pinned agent without review. Some fields are directional,
// like schemas: needing a connection, metering, replaying more often,
// reaching the open world, a tighter batch bound, a changed item kind or a
// dropped policy fact need MAJOR, while the reverse needs MINOR. A field
// the gate does not know needs MAJOR too, so a new Definition field is
// never waved through before someone decides what it means.
func Classify(prev, next *toolplane.Definition) (Report, error) {
	if prev == nil || next == nil {
		return Report{}, errors.New("compat: classify: both the published and the new definition are needed")
	}
	rep, err := classify(prev, next)
	if err != nil {
		return Report{}, fmt.Errorf("compat: classify %s: %w", prev.Name, err)
	}
	return rep, nil
}

func classify(prev, next *toolplane.Definition) (Report, error) {
	if prev.Name != next.Name {
		return Report{}, fmt.Errorf("%q and %q are different tools; a rename is a new tool, not a new version", prev.Name, next.Name)
	}
	var all []Change
	for _, s := range []struct {
		side      Side
		old, next json.RawMessage
	}{
		{SideInput, prev.InputSchema, next.InputSchema},
		{SideOutput, prev.OutputSchema, next.OutputSchema},
	} {
		cs, err := diff(s.old, s.next, s.side)
		if err != nil {
			return Report{}, err
		}
		all = append(all, cs...)
	}
	cs, err := errorSchema(prev.ErrorSchema, next.ErrorSchema)
	if err != nil {
		return Report{}, err
	}
	all = append(all, cs...)
	meta, err := metadata(prev, next)
	if err != nil {
		return Report{}, err
	}
	all = append(all, meta...)
	return Report{Required: maxBump(all), Changes: all}, nil
}

func absent(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// errorSchema is optional. Declaring one where there was none documents
// errors that already existed, which narrows nothing a consumer relied on;
// withdrawing one leaves consumers without the shape they parse.
func errorSchema(before, after json.RawMessage) ([]Change, error) {
	switch {
	case absent(before) && absent(after):
		return nil, nil
	case absent(before):
		if _, err := decodeSchema(after); err != nil {
			return nil, fmt.Errorf("new error schema: %w", err)
		}
		return []Change{{Side: SideError, Kind: KindConstraintNarrowed, Detail: "error schema declared", Bump: Minor}}, nil
	case absent(after):
		return []Change{{Side: SideError, Kind: KindConstraintWidened, Detail: "error schema withdrawn: consumers lose the shape of the errors they parse", Bump: Major}}, nil
	}
	return diff(before, after, SideError)
}

// meta collects definition metadata changes.
type meta []Change

func (m *meta) add(path string, kind Kind, b Bump, format string, args ...any) {
	*m = append(*m, Change{Side: SideDefinition, Path: path, Kind: kind, Detail: fmt.Sprintf(format, args...), Bump: b})
}

func (m *meta) info(path string, changed bool) {
	if changed {
		m.add(path, KindMetadataChanged, Patch, "changed")
	}
}

func metadata(prev, next *toolplane.Definition) ([]Change, error) {
	var m meta
	if prev.Description != next.Description {
		m.add("description", KindDescriptionChanged, Patch, "changed")
	}
	m.info("tags", !sameSet(prev.Tags, next.Tags))
	// A title and search hints help people and search find the tool; the
	// model reads neither to call it.
	m.info("title", prev.Title != next.Title)
	m.info("search_hints", !sameSet(prev.SearchHints, next.SearchHints))
	m.info("owner", prev.Owner != next.Owner)
	m.info("on_call", prev.OnCall != next.OnCall)
	m.info("cost_center", prev.CostCenter != next.CostCenter)
	// Dependency edges guide a planner; they change no call's contract.
	m.info("dependencies", !sameDependencies(prev.Dependencies, next.Dependencies))
	// The preview only renders the approval line; the approval itself is
	// decided elsewhere.
	m.info("approval_preview", prev.ApprovalPreview != next.ApprovalPreview)

	if prev.Kind != next.Kind {
		m.add("kind", KindBehaviourChanged, Major, "changed from %s to %s: a different party executes the call", show(string(prev.Kind)), show(string(next.Kind)))
	}
	binding(&m, prev.Binding, next.Binding)
	effect(&m, prev.Effect, next.Effect)
	annotations(&m, prev.Annotations, next.Annotations)
	execution(&m, prev, next)
	approval(&m, prev.Approval, next.Approval)
	limits(&m, prev, next)

	unknown, err := unknownFields(prev, next)
	if err != nil {
		return nil, err
	}
	for _, p := range unknown {
		m.add(p, KindUnclassified, Major, "changed; the gate does not know this field, so it counts as breaking")
	}
	sort.SliceStable(m, func(i, j int) bool { return m[i].Path < m[j].Path })
	return m, nil
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

// binding: a remote binding names the server that receives the arguments,
// so moving it is a change of trust; a handler key names code in the same
// deployment under the same contract. An HTTP binding's scheme, host or
// method decide who receives the arguments and what the request means;
// the rest of its request, and a SQL binding's statement, are the same
// party serving the same contract in another way (publishing them is
// reviewed: see catalog).
func binding(m *meta, a, b toolplane.Binding) {
	switch {
	case a.Kind() != b.Kind():
		m.add("binding", KindBehaviourChanged, Major, "moved between a handler, a remote tool, an HTTP request and a SQL statement: a different party executes the call")
	case a.Remote != nil && *a.Remote != *b.Remote:
		m.add("binding.remote", KindBehaviourChanged, Major, "changed from %s/%s to %s/%s: a different server receives the arguments", a.Remote.ConnectionID, a.Remote.RemoteName, b.Remote.ConnectionID, b.Remote.RemoteName)
	case a.Handler != nil && a.Handler.Key != b.Handler.Key:
		m.add("binding.handler.key", KindBehaviourChanged, Minor, "changed from %q to %q: other code in the same deployment serves the same contract", a.Handler.Key, b.Handler.Key)
	case a.HTTP != nil:
		httpBinding(m, a.HTTP, b.HTTP)
	case a.SQL != nil && !reflect.DeepEqual(a.SQL, b.SQL):
		m.add("binding.sql", KindBehaviourChanged, Minor, "the statement or its row cap changed: the same database serves the same contract another way")
	}
}

// httpBinding classifies a change of an HTTP request.
func httpBinding(m *meta, a, b *toolplane.HTTPBinding) {
	origin := func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil {
			return raw
		}
		return strings.ToLower(u.Scheme + "://" + u.Host)
	}
	switch {
	case origin(a.URL) != origin(b.URL):
		m.add("binding.http.url", KindBehaviourChanged, Major, "changed from %s to %s: a different server receives the arguments", origin(a.URL), origin(b.URL))
	case !strings.EqualFold(a.Method, b.Method):
		m.add("binding.http.method", KindBehaviourChanged, Major, "changed from %s to %s: the request means something else", a.Method, b.Method)
	case !reflect.DeepEqual(a, b):
		m.add("binding.http", KindBehaviourChanged, Minor, "the request's path, parameters, body or answer mapping changed: the same server serves the same contract another way")
	}
}

// effect decides idempotency claims, retries and which policies apply, and
// tells an agent whether exploring the tool is safe, so any change is
// MAJOR: read to write starts changing the world under callers that
// treated it as safe, and write to read drops the guards a write gets.
func effect(m *meta, a, b toolplane.Effect) {
	if a == b {
		return
	}
	why := "idempotency claims, retries and policies follow the effect"
	if b.Writes() && !a.Writes() {
		why = "calls now change the world"
	}
	m.add("effect", KindBehaviourChanged, Major, "changed from %s to %s: %s", show(string(a)), show(string(b)), why)
}

func annotations(m *meta, a, b toolplane.Annotations) {
	// Either direction of destructive and requires_approval changes which
	// human checks guard a call: adding them pauses or gates callers that
	// never waited, removing them drops a check on the author's word.
	if a.Destructive != b.Destructive {
		m.add("annotations.destructive", KindBehaviourChanged, Major, "changed from %t to %t: approval gates and anomaly thresholds follow it", a.Destructive, b.Destructive)
	}
	if a.RequiresApproval != b.RequiresApproval {
		m.add("annotations.requires_approval", KindBehaviourChanged, Major, "changed from %t to %t: calls now %s a person's approval", a.RequiresApproval, b.RequiresApproval, map[bool]string{true: "wait for", false: "skip"}[b.RequiresApproval])
	}
	// long_running forces async execution: the caller gets a job instead
	// of an answer.
	if a.LongRunning != b.LongRunning {
		m.add("annotations.long_running", KindBehaviourChanged, Major, "changed from %t to %t: callers get a job instead of an answer, or the reverse", a.LongRunning, b.LongRunning)
	}
	// Reaching the open world is a trust change; ceasing to is not.
	switch {
	case !a.OpenWorld && b.OpenWorld:
		m.add("annotations.open_world", KindBehaviourChanged, Major, "now reaches outside the platform")
	case a.OpenWorld && !b.OpenWorld:
		m.add("annotations.open_world", KindBehaviourChanged, Minor, "no longer reaches outside the platform")
	}
	// idempotent steers replays and retries inside the platform; a caller
	// sees the same contract either way.
	if a.Idempotent != b.Idempotent {
		m.add("annotations.idempotent", KindBehaviourChanged, Minor, "changed from %t to %t", a.Idempotent, b.Idempotent)
	}
}

func effectiveTimeout(d *toolplane.Definition) time.Duration {
	if t := d.Timeout.Std(); t > 0 {
		return t
	}
	return registry.DefaultTimeout
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func execution(m *meta, a, b *toolplane.Definition) {
	if am, bm := orDefault(a.Mode, toolplane.ModeSync), orDefault(b.Mode, toolplane.ModeSync); am != bm {
		m.add("mode", KindBehaviourChanged, Major, "changed from %s to %s: callers get a job instead of an answer, or the reverse", am, bm)
	}
	// Latency is never part of the contract, but a shorter bound can fail a
	// call that used to finish, so it is more than documentation.
	if at, bt := effectiveTimeout(a), effectiveTimeout(b); at != bt {
		if bt < at {
			m.add("timeout", KindBehaviourChanged, Minor, "lowered from %v to %v: slow calls that used to finish may now time out", at, bt)
		} else {
			m.add("timeout", KindMetadataChanged, Patch, "raised from %v to %v", at, bt)
		}
	}
	if ar, br := orDefault(a.Retry, toolplane.RetryNone), orDefault(b.Retry, toolplane.RetryNone); ar != br {
		m.add("retry", KindBehaviourChanged, Minor, "changed from %s to %s", ar, br)
	}
	attempts(m, a.Execution, b.Execution)
	// Replay starts the effect again after a lost attempt; more starts than
	// before is a change in what can happen to the world.
	aa, ba := 0, 0
	if a.Replay != nil {
		aa = a.Replay.MaxAttempts
	}
	if b.Replay != nil {
		ba = b.Replay.MaxAttempts
	}
	switch {
	case (a.Replay == nil) != (b.Replay == nil) || aa != ba:
		if ba > aa || (a.Replay == nil && b.Replay != nil) {
			m.add("replay", KindBehaviourChanged, Major, "allows %d start(s) after a lost attempt, up from %d: an effect may now start more often", ba, aa)
		} else {
			m.add("replay", KindBehaviourChanged, Minor, "allows %d start(s) after a lost attempt, down from %d", ba, aa)
		}
	}
	// Metering can refuse a call for budget, which it never was before.
	switch {
	case !a.Metered && b.Metered:
		m.add("metered", KindBehaviourChanged, Major, "calls are now metered and can be refused for budget")
	case a.Metered && !b.Metered:
		m.add("metered", KindBehaviourChanged, Minor, "calls are no longer metered")
	}
	// A price is what each call spends of a run's and an organization's
	// budget: one that can charge more refuses budgets sooner.
	if !equalPrice(a.Price, b.Price) {
		if priceBound(b.Price) > priceBound(a.Price) || (a.Price != nil && b.Price != nil && a.Price.Field != b.Price.Field) {
			m.add("price", KindBehaviourChanged, Minor, "a call can now cost up to %d cents, was %d: budgets are spent sooner", priceBound(b.Price), priceBound(a.Price))
		} else {
			m.add("price", KindBehaviourChanged, Patch, "a call now costs at most %d cents, was %d", priceBound(b.Price), priceBound(a.Price))
		}
	}
	// repeatable decides whether two identical calls are one effect or two.
	if !equalBoolPtr(a.Repeatable, b.Repeatable) {
		m.add("repeatable", KindBehaviourChanged, Major, "changed from %s to %s: whether two identical calls are one effect or two", showBoolPtr(a.Repeatable), showBoolPtr(b.Repeatable))
	}
	if a.Connection != b.Connection {
		switch {
		case a.Connection == "":
			m.add("connection", KindBehaviourChanged, Major, "calls now need connection %q; a caller without it is refused", b.Connection)
		case b.Connection == "":
			m.add("connection", KindBehaviourChanged, Minor, "calls no longer need connection %q", a.Connection)
		default:
			m.add("connection", KindBehaviourChanged, Major, "changed from %q to %q: calls act with other credentials", a.Connection, b.Connection)
		}
	}
}

// attempts classifies the attempts of the execution block. They are
// operational, like retry: more or fewer attempts, a longer or shorter
// bound on each, other pauses change how hard a failing downstream is
// pressed and how long a caller may wait, never what a call does to the
// world (a second attempt is made only where it cannot be a second
// effect), so every change needs MINOR.
func attempts(m *meta, a, b *toolplane.Execution) {
	if x, y := a.Attempts(true), b.Attempts(true); x != y {
		m.add("execution.max_attempts", KindBehaviourChanged, Minor, "changed from %d to %d", x, y)
	}
	if x, y := a.AttemptLimit(), b.AttemptLimit(); x != y {
		m.add("execution.attempt_timeout", KindBehaviourChanged, Minor, "changed from %v to %v", x, y)
	}
	if x, y := a.PauseCeiling(0), b.PauseCeiling(0); x != y {
		m.add("execution.backoff", KindBehaviourChanged, Minor, "changed from %v to %v", x, y)
	}
	if x, y := a.PauseCeiling(64), b.PauseCeiling(64); x != y {
		m.add("execution.max_backoff", KindBehaviourChanged, Minor, "changed from %v to %v", x, y)
	}
	// The traffic fields are operational too: they decide when a call is
	// refused at once (an in-flight cap, a rate, what a saturated node
	// sheds first), never what an admitted call does.
	var ax, bx toolplane.Execution
	if a != nil {
		ax = *a
	}
	if b != nil {
		bx = *b
	}
	if ax.MaxInFlight != bx.MaxInFlight {
		m.add("execution.max_in_flight", KindBehaviourChanged, Minor, "changed from %d to %d", ax.MaxInFlight, bx.MaxInFlight)
	}
	if ax.RatePerMinute != bx.RatePerMinute {
		m.add("execution.rate_per_minute", KindBehaviourChanged, Minor, "changed from %d to %d", ax.RatePerMinute, bx.RatePerMinute)
	}
	if ax.Priority != bx.Priority {
		m.add("execution.priority", KindBehaviourChanged, Minor, "changed from %q to %q", ax.Priority, bx.Priority)
	}
}

func equalBoolPtr(a, b *bool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func showBoolPtr(p *bool) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// approval: who approves and what silence means are governance, so they
// need MAJOR; how long an approval waits is operational.
func approval(m *meta, a, b *toolplane.ApprovalPolicy) {
	var x, y toolplane.ApprovalPolicy
	if a != nil {
		x = *a
	}
	if b != nil {
		y = *b
	}
	if !slices.Equal(x.Chain, y.Chain) {
		m.add("approval.chain", KindBehaviourChanged, Major, "approvers changed from %v to %v", x.Chain, y.Chain)
	}
	if ot, nt := orDefault(x.OnTimeout, toolplane.OnTimeoutDeny), orDefault(y.OnTimeout, toolplane.OnTimeoutDeny); ot != nt {
		m.add("approval.on_timeout", KindBehaviourChanged, Major, "changed from %s to %s: an unanswered approval now ends differently", ot, nt)
	}
	if x.TTL != y.TTL {
		m.add("approval.ttl", KindBehaviourChanged, Minor, "changed from %v to %v", x.TTL.Std(), y.TTL.Std())
	}
}

func limits(m *meta, a, b *toolplane.Definition) {
	// A policy rule that reads a fact breaks when the fact goes; a new
	// fact only adds a resolver call.
	for _, f := range a.PolicyFacts {
		if !slices.Contains(b.PolicyFacts, f) {
			m.add("policy_facts", KindBehaviourChanged, Major, "fact %q removed: policy rules that read it lose it", f)
		}
	}
	for _, f := range b.PolicyFacts {
		if !slices.Contains(a.PolicyFacts, f) {
			m.add("policy_facts", KindBehaviourChanged, Minor, "fact %q added", f)
		}
	}
	// The batch bound limits the input: tightening it refuses calls that
	// used to pass, like lowering a maxItems.
	switch {
	case a.BatchArgument == b.BatchArgument && a.MaxBatchSize == b.MaxBatchSize:
	case a.BatchArgument == "" && a.MaxBatchSize == 0:
		m.add("max_batch_size", KindBehaviourChanged, Major, "batch bound %d on %q added: larger batches are now refused", b.MaxBatchSize, b.BatchArgument)
	case b.BatchArgument == "" && b.MaxBatchSize == 0:
		m.add("max_batch_size", KindBehaviourChanged, Minor, "batch bound %d on %q removed", a.MaxBatchSize, a.BatchArgument)
	case a.BatchArgument != b.BatchArgument:
		m.add("batch_argument", KindBehaviourChanged, Major, "changed from %q to %q: another argument is now bounded", a.BatchArgument, b.BatchArgument)
	case b.MaxBatchSize < a.MaxBatchSize:
		m.add("max_batch_size", KindBehaviourChanged, Major, "lowered from %d to %d: larger batches are now refused", a.MaxBatchSize, b.MaxBatchSize)
	default:
		m.add("max_batch_size", KindBehaviourChanged, Minor, "raised from %d to %d", a.MaxBatchSize, b.MaxBatchSize)
	}
	// Result and byte bounds decide how much of an answer survives
	// truncation, never its shape: a consumer already handles a dropped
	// marker.
	if a.MaxResults != b.MaxResults {
		m.add("max_results", KindBehaviourChanged, Minor, "changed from %d to %d", a.MaxResults, b.MaxResults)
	}
	if ab, bb := orDefault(a.MaxOutputBytes, boundary.PlatformLimit), orDefault(b.MaxOutputBytes, boundary.PlatformLimit); ab != bb {
		m.add("max_output_bytes", KindBehaviourChanged, Minor, "changed from %d to %d", ab, bb)
	}
	// item_kind is the kind a consumer finds in a dropped item's reference.
	switch {
	case a.ItemKind == b.ItemKind:
	case a.ItemKind == "":
		m.add("item_kind", KindBehaviourChanged, Minor, "dropped items now carry a %q reference", b.ItemKind)
	default:
		m.add("item_kind", KindBehaviourChanged, Major, "changed from %q to %q: consumers that resolve dropped items' references break", a.ItemKind, b.ItemKind)
	}
}

// fields describes the JSON shape of the definition fields the gate
// classifies above; a nil value is a leaf.
type fields map[string]fields

var knownFields = fields{
	"name": nil, "version": nil, "title": nil, "description": nil, "search_hints": nil,
	"input_schema": nil, "output_schema": nil, "error_schema": nil, "schema_hash": nil,
	"kind": nil, "effect": nil, "connection": nil, "timeout": nil, "retry": nil,
	"metered": nil, "price": nil, "repeatable": nil, "approval_preview": nil, "policy_facts": nil,
	"batch_argument": nil, "max_batch_size": nil, "max_results": nil, "max_output_bytes": nil,
	"item_kind": nil, "tags": nil, "owner": nil, "on_call": nil, "cost_center": nil, "mode": nil,
	"dependencies": nil,
	"binding": {
		"handler": {"key": nil},
		"remote":  {"connection_id": nil, "remote_name": nil},
		"http": {"method": nil, "url": nil, "query": nil, "headers": nil, "body": nil, "output": nil,
			"status_field": nil, "idempotency_header": nil, "max_response_bytes": nil},
		"sql": {"statement": nil, "max_rows": nil},
	},
	"annotations": {"destructive": nil, "idempotent": nil, "requires_approval": nil, "long_running": nil, "open_world": nil},
	"approval":    {"chain": nil, "on_timeout": nil, "ttl": nil},
	"replay":      {"max_attempts": nil},
	"execution": {"max_attempts": nil, "attempt_timeout": nil, "backoff": nil, "max_backoff": nil,
		"max_in_flight": nil, "rate_per_minute": nil, "priority": nil},
}

// unknownFields answers the paths of definition fields that differ and
// that the gate does not classify: fields added to Definition after these
// rules were written.
func unknownFields(a, b *toolplane.Definition) ([]string, error) {
	am, err := asJSON(a)
	if err != nil {
		return nil, fmt.Errorf("published definition: %w", err)
	}
	bm, err := asJSON(b)
	if err != nil {
		return nil, fmt.Errorf("new definition: %w", err)
	}
	return residueDiff(am, bm, knownFields), nil
}

func asJSON(d *toolplane.Definition) (map[string]any, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// residueDiff compares what is left of a and b once the known fields are
// set aside, and answers the paths that differ.
func residueDiff(a, b map[string]any, known fields) []string {
	ra, rb := map[string]any{}, map[string]any{}
	residue(a, known, "", ra)
	residue(b, known, "", rb)
	var out []string
	for _, k := range sortedKeys(union(ra, rb)) {
		av, aHas := ra[k]
		bv, bHas := rb[k]
		if aHas != bHas || !equalJSON(av, bv) {
			out = append(out, k)
		}
	}
	return out
}

func residue(m map[string]any, known fields, prefix string, out map[string]any) {
	for k, v := range m {
		sub, isKnown := known[k]
		switch {
		case !isKnown:
			out[prefix+k] = v
		case sub != nil:
			if vm, ok := v.(map[string]any); ok {
				residue(vm, sub, prefix+k+".", out)
			}
		}
	}
}

func sameDependencies(a, b []toolplane.Dependency) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[toolplane.Dependency]int{}
	for _, d := range a {
		seen[d]++
	}
	for _, d := range b {
		if seen[d] == 0 {
			return false
		}
		seen[d]--
	}
	return true
}

func equalPrice(a, b *toolplane.Price) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// priceBound answers the most one call of a tool priced p can cost: its
// fixed price, or the bound of the price its answer states.
func priceBound(p *toolplane.Price) int64 {
	switch {
	case p == nil:
		return 0
	case p.Field != "":
		return p.MaxCents
	}
	return p.Cents
}
