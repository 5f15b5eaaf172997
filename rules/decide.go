package rules

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/schema"
)

// recheck is how stale a node's compiled rules may be before the
// organization's latest version is read again: a bundle published on
// another node takes effect here within it, and within two seconds
// counting the read itself.
const recheck = time.Second

// FailOpenFor is how long after the last successful read of the store a
// read-only tool annotated fail_open may still be decided from the last
// known good rules and grants.
const FailOpenFor = 30 * time.Second

// maxInput bounds the document a call's audit event keeps for shadow runs;
// a larger one is not kept, and shadow says so.
const maxInput = 16 << 10

// compiled is one organization's rules at a version, as this node holds
// them.
type compiled struct {
	version int64
	// rules is nil when no bundle is published or the version in force
	// disables them.
	rules policy.Rules
	zone  *time.Location
	// checked is the last time the store confirmed version is the latest.
	checked time.Time
}

// load answers the organization's compiled rules, the latest version read
// again when the cached one may be stale. A version that does not compile
// (an engine changed under a stored bundle) is a fault, never a silent
// fallback to the grants alone.
func (s *Service) load(ctx context.Context, org string) (*compiled, error) {
	now := s.now()
	s.mu.Lock()
	c := s.cache[org]
	fresh := c != nil && now.Sub(c.checked) < recheck
	s.mu.Unlock()
	if fresh {
		return c, nil
	}
	v, err := s.store.PolicyBundleVersion(ctx, org)
	if err != nil {
		return nil, fmt.Errorf("policy bundle version: %w", err)
	}
	if c != nil && c.version == v {
		s.mu.Lock()
		c.checked = now
		s.mu.Unlock()
		return c, nil
	}
	nc := &compiled{version: v, zone: s.zone, checked: now}
	if v > 0 {
		b, err := s.store.GetPolicyBundle(ctx, org, v)
		if err != nil {
			return nil, fmt.Errorf("policy bundle %d: %w", v, err)
		}
		if b.TimeZone != "" {
			if nc.zone, err = zone(b.TimeZone); err != nil {
				return nil, fmt.Errorf("policy bundle %d: %w", v, err)
			}
		}
		if !b.Disabled {
			r, _, err := Compile(s.languages(), b.Files)
			if err != nil {
				return nil, fmt.Errorf("policy bundle %d no longer compiles: %w", v, err)
			}
			nc.rules = r
		}
	}
	s.mu.Lock()
	s.cache[org] = nc
	s.mu.Unlock()
	return nc, nil
}

// lastKnown answers the organization's cached rules when the store
// confirmed them within FailOpenFor.
func (s *Service) lastKnown(org string) *compiled {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cache[org]
	if c == nil || s.now().Sub(c.checked) > FailOpenFor {
		return nil
	}
	return c
}

// Zone answers the time zone org's rules read time in: its bundle's, or
// the deployment's (Config.Zone) when the bundle names none or there is
// none. The org_time fact reads it, so a fact and a rule never disagree
// on the hour.
func (s *Service) Zone(ctx context.Context, org string) (*time.Location, error) {
	c, err := s.load(ctx, org)
	if err != nil {
		return nil, err
	}
	return c.zone, nil
}

// TimeZone answers the name of the zone version b's rules read time in:
// its own, or the deployment's (Config.Zone) when it names none.
func (s *Service) TimeZone(b *toolplane.PolicyBundle) string {
	if b.TimeZone != "" {
		return b.TimeZone
	}
	return s.zone.String()
}

// failOpen reports whether a tool may be decided from the last known good
// rules while the store cannot be read: a read-only tool annotated
// fail_open, never one that writes, is destructive or needs a person.
func failOpen(d *toolplane.Definition) bool {
	return d.Annotations.FailOpen && !d.Writes() && !d.Annotations.Destructive && !d.Annotations.RequiresApproval
}

// recorded is what a call's audit event keeps of its decision for a
// shadow run: stage 1's answer, and the document stage 2 read.
type recorded struct {
	Grants  string          `json:"grants"`
	Request *policy.Request `json:"request"`
}

// Decide implements policy.Policy: stage 1 (the grants) and then the
// organization's latest bundle; the stricter answer wins (deny over
// require_approval over allow), and a rule asking for approval routes it.
// A store that cannot be read, rules that cannot decide or run past their
// budget are errors (the invoker answers internal_error), except for a
// read-only fail_open tool, decided from the last known good grants and
// rules for up to FailOpenFor and marked Degraded.
func (s *Service) Decide(ctx context.Context, in policy.Input) (policy.Decision, error) {
	org := in.Invocation.OrganizationID
	degraded := false
	d1, err := s.grants.Decide(ctx, in)
	if err != nil {
		if !failOpen(in.Tool) {
			return policy.Decision{}, err
		}
		if d1, err = s.grants.DecideLastKnown(in, FailOpenFor); err != nil {
			return policy.Decision{}, fmt.Errorf("grants unreadable and no last known good: %w", err)
		}
		degraded = true
	}
	if d1.Effect == policy.Deny {
		d1.Degraded = degraded
		return d1, nil
	}
	c, err := s.load(ctx, org)
	if err != nil {
		if !failOpen(in.Tool) {
			return policy.Decision{}, err
		}
		if c = s.lastKnown(org); c == nil {
			return policy.Decision{}, fmt.Errorf("no last known good rules: %w", err)
		}
		degraded = true
	}
	// A call outside any run has spent nothing: the usage of every such
	// call shares the empty root, and is no one call's spend.
	var cost int64
	if root := in.Invocation.EffectiveRootRunID(); s.runCost != nil && c.rules != nil && !degraded && root != "" {
		if cost, err = s.runCost(ctx, org, root); err != nil {
			return policy.Decision{}, fmt.Errorf("run cost: %w", err)
		}
	}
	req := policy.NewRequest(in, s.now(), c.zone, cost)
	out := d1
	out.Degraded = degraded
	out.Input = record(d1.Effect, req)
	if c.rules == nil {
		return out, nil
	}
	d2, err := s.evaluate(ctx, c.rules, req)
	if err != nil {
		return policy.Decision{}, fmt.Errorf("policy bundle %d: %w", c.version, err)
	}
	d2.Bundle = c.version
	return combine(out, d2, req), nil
}

// evaluate runs rules on req within the budget.
func (s *Service) evaluate(ctx context.Context, rules policy.Rules, req *policy.Request) (policy.Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, s.budget)
	defer cancel()
	d, err := rules.Evaluate(ctx, req)
	if err == nil && ctx.Err() != nil {
		err = policy.ErrBudget
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: %w", policy.ErrBudget, err)
	}
	return d, err
}

// combine answers the stricter of stage 1's decision d1 and stage 2's d2:
// deny over require_approval over allow. Stage 2's bundle is kept whenever
// it ran, its rule and route when it decided (a rule allowing a call the
// tool's own requires_approval sends to a person did not decide it, and
// is not the rule that asked); a manager route is resolved to the requesting
// user's manager, and a route to a manager no one knows is a denial, not a
// call anyone may approve.
func combine(d1, d2 policy.Decision, req *policy.Request) policy.Decision {
	out := d1
	out.Bundle, out.Rule = d2.Bundle, d2.Rule
	if d1.Effect == policy.RequireApproval && d2.Effect == policy.Allow {
		out.Rule = ""
	}
	switch {
	case d2.Effect == policy.Deny:
		out.Effect, out.Reason = policy.Deny, d2.Reason
	case d2.Effect == policy.RequireApproval:
		out.Effect, out.Reason = policy.RequireApproval, d2.Reason
		if a := d2.Approval; a != nil {
			route := *a
			if route.Manager {
				if req.User == nil || req.User.Manager == "" {
					out.Effect = policy.Deny
					out.Reason = fmt.Sprintf("rule %s asks the requesting user's manager to approve, and no manager is known for this call", d2.Rule)
					return out
				}
				route.Person = req.User.Manager
			}
			out.Approval = &route
		}
	}
	return out
}

// record answers the audit form of what a call was decided on, nil when
// it is too large to keep: the arguments and facts redacted as a span's
// are (credentials by name and shape, and every value at a pointer
// tool.sensitive lists, wherever a fact echoed it), and then every text
// value of theirs kept only as its digest (see digester.text): text is what
// a caller can put anything in, a secret included, and the audit trail
// keeps no secret, while two texts equal then (a recipient and the
// order's account) still compare equal in a shadow run. The claimed
// attributes are redacted by name and shape.
func record(grants policy.Effect, req *policy.Request) string {
	// A copy of the request, its values replaced by what the trail keeps
	// of them; it is written as {"grants": ..., "request": r}.
	rec := *req
	r := &rec
	secret := schema.SensitiveValues(req.Arguments, req.Tool.Sensitive)
	// The values at the sensitive pointers go whatever their type; Hide
	// then finds the text ones wherever else they were copied.
	masked := schema.Mask(req.Arguments, req.Tool.Sensitive, boundary.Redacted)
	args := boundary.Hide(boundary.Redact(masked), secret)
	facts := boundary.Hide(boundary.Redact(req.Facts), secret)
	var d digester
	d.b.Grow(digestLen * (texts(args) + texts(facts)))
	if m, ok := d.text(args).(map[string]any); ok {
		r.Arguments = m
	}
	if m, ok := d.text(facts).(map[string]any); ok {
		r.Facts = m
	}
	// The person's and the agent's attributes are claims the deployment
	// maps from tokens, and are redacted by the same rule.
	if attrs, ok := boundary.Redact(req.Principal.Attributes).(map[string]any); ok {
		r.Principal.Attributes = attrs
	}
	if req.User != nil {
		u := *req.User
		if attrs, ok := boundary.Redact(u.Attributes).(map[string]any); ok {
			u.Attributes = attrs
		}
		r.User = &u
	}
	// Written into a buffer kept from call to call: the text is copied
	// once, into the answer.
	buf := encodeBuffers.Get().(*[]byte)
	defer putEncodeBuffer(buf)
	b, err := appendRecord((*buf)[:0], grants.String(), r)
	*buf = b
	if err != nil || len(b) > maxInput {
		return ""
	}
	return string(b)
}

// encodeBuffers holds the buffers records are encoded in.
var encodeBuffers = sync.Pool{New: func() any { return new([]byte) }}

// putEncodeBuffer gives buf back to encodeBuffers unless it grew past
// what a record may keep: one call's large arguments do not stay held.
func putEncodeBuffer(buf *[]byte) {
	if cap(*buf) <= 2*maxInput {
		encodeBuffers.Put(buf)
	}
}

// digestPrefix marks a text value the audit trail keeps as its digest.
const digestPrefix = "sha256:"

// digestLen is the length of a digest: digestPrefix and 128 bits in hex.
const digestLen = len(digestPrefix) + 32

// digester writes the digests of one record into one buffer: a
// strings.Builder never changes what it has written, even as it grows, so
// each digest is a slice of its text rather than a string of its own.
type digester struct {
	b strings.Builder
}

// text answers v with every string replaced by digestPrefix and the first
// 128 bits of its SHA-256, in hex; the redaction marker stays as it is.
func (d *digester) text(v any) any {
	switch x := v.(type) {
	case string:
		if x == boundary.Redacted {
			return x // already nothing of the value
		}
		sum := sha256.Sum256([]byte(x))
		var h [32]byte
		hex.Encode(h[:], sum[:16])
		start := d.b.Len()
		d.b.WriteString(digestPrefix)
		d.b.Write(h[:])
		return d.b.String()[start:]
	case map[string]any:
		if x != nil && len(x) == 0 {
			// Nothing to replace, and nothing to copy. A nil map is
			// copied: it would encode as null, and the record has always
			// said {} for it.
			return x
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = d.text(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = d.text(e)
		}
		return out
	}
	return v
}

// texts counts the strings digester.text replaces in v, so that one
// buffer holds every digest of a record.
func texts(v any) int {
	switch x := v.(type) {
	case string:
		if x != boundary.Redacted {
			return 1
		}
	case map[string]any:
		n := 0
		for _, e := range x {
			n += texts(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range x {
			n += texts(e)
		}
		return n
	}
	return 0
}

// Explanation is what decides one call of a tool: the effect, why, the
// rule and bundle version that decided (none when the grants alone did),
// and the route of an approval.
type Explanation struct {
	Agent    string           `json:"agent_id"`
	Tool     string           `json:"tool"`
	Version  string           `json:"version"`
	Effect   string           `json:"effect"`
	Reason   string           `json:"reason"`
	Rule     string           `json:"rule,omitempty"`
	Bundle   int64            `json:"bundle,omitempty"`
	Approval *policy.Approval `json:"approval,omitempty"`
}

// Explain answers how agent's call of tool with args (validated by the
// tool's input schema, whose x-sensitive pointers sensitive lists), acting
// for user when set, would be decided now: the grants, then the
// organization's rules, as Decide decides it, with a key that admits the
// tool. Nothing is recorded and nothing runs. It needs the role that reads
// bundles.
func (s *Service) Explain(ctx context.Context, agent, user string, tool *toolplane.Definition, args map[string]any, sensitive []string, by *toolplane.Credential) (*Explanation, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	if args == nil {
		args = map[string]any{}
	}
	in := policy.Input{Tool: tool, Arguments: args, Sensitive: sensitive, Invocation: &toolplane.Invocation{
		OrganizationID: by.OrganizationID, AgentID: agent, UserID: user, RunID: "explain",
		Principal: toolplane.Principal{ID: agent, Tools: []string{tool.Name}}, Source: toolplane.SourceREST,
	}}
	d, err := s.Decide(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("explain %s for %s: %w", tool.Name, agent, err)
	}
	return &Explanation{Agent: agent, Tool: tool.Name, Version: tool.Version, Effect: d.Effect.String(), Reason: d.Reason,
		Rule: d.Rule, Bundle: d.Bundle, Approval: d.Approval}, nil
}
