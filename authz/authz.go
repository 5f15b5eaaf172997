// Package authz decides which tools each agent identity may call, and
// which a person may have an agent call for them: grants (to an agent, a
// person or a group of people; patterns or bundles, with optional version
// ranges, tenant scope and expiry), denies that always win (one agent's,
// or every agent's at once during an incident), and bundles. Every change is role-checked and
// recorded in the change log. Decisions read the grants as they are at
// the moment of the decision, so a grant removed while a call waited
// refuses it.
//
// A change or a read the caller's roles do not allow is refused with
// toolplane.ErrForbidden, one that is not acceptable as asked with
// toolplane.ErrInvalid (wrapping a *toolplane.TooLongError when an
// identifier is too long).
package authz

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/semver"
)

// recheck is how stale a cached view of an organization's grants may be
// before its revision is read again. Changes made on this node are seen
// at once; another node's within this.
const recheck = time.Second

// Service manages and evaluates grants.
type Service struct {
	store toolplane.GrantStore
	reg   *registry.Registry
	now   func() time.Time

	mu       sync.Mutex
	cache    map[string]*view
	watchers []func()
}

// OnChange calls fn after every change made through this service (a
// grant, a deny, a bundle), so a door can refresh what it shows; changes
// made on another node are seen at the next decision or listing.
func (s *Service) OnChange(fn func()) {
	s.mu.Lock()
	s.watchers = append(s.watchers, fn)
	s.mu.Unlock()
}

// view is one organization's grants, denies and bundles at a revision.
type view struct {
	rev     int64
	checked time.Time
	// grants are by agent: a decision reads only its agent's.
	grants  map[string][]toolplane.Grant
	denies  []toolplane.Deny
	bundles map[string]toolplane.Bundle
	// users and groups are the grants to people, by person and by group;
	// people counts them all.
	users, groups map[string][]toolplane.Grant
	people        int
}

// Config is what a Service is built from. Store is required, and so is
// Registry to decide; the rest have defaults.
type Config struct {
	Store toolplane.GrantStore
	// Registry is what grant and deny patterns are resolved against
	// when a call is decided or a grant explained; a service that only
	// adds grants needs none.
	Registry *registry.Registry
	// Now is the clock grants are recorded and expire by; nil is time.Now.
	Now func() time.Time
}

// New answers a service built from cfg.
func New(cfg Config) *Service {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Service{store: cfg.Store, reg: cfg.Registry, now: now, cache: map[string]*view{}}
}

// checkPattern validates a grant or deny pattern: a glob over platform
// names, optionally pinned to a version range.
func checkPattern(p string, pinned bool) error {
	name, rng := semver.SplitRef(p)
	if name == "" {
		return fmt.Errorf("%w: pattern is empty", toolplane.ErrInvalid)
	}
	if _, err := path.Match(name, "x"); err != nil {
		return fmt.Errorf("%w: pattern %q: %v", toolplane.ErrInvalid, name, err)
	}
	if rng != "" {
		if !pinned {
			return fmt.Errorf("%w: a deny names tools, not versions: drop @%s", toolplane.ErrInvalid, rng)
		}
		if _, err := semver.ParseRange(rng); err != nil {
			return fmt.Errorf("%w: range %q: %v", toolplane.ErrInvalid, rng, err)
		}
	}
	return nil
}

// MayGrant refuses a caller who may not change grants or bundles: they
// are an agent_operator's or a platform_admin's. A door may ask before it
// reads a request's body; every change asks again.
func MayGrant(by *toolplane.Credential) error {
	if !by.HasRole(toolplane.RoleAgentOperator, "") {
		return fmt.Errorf("%w: grants and bundles are changed by an agent_operator or a platform_admin", toolplane.ErrForbidden)
	}
	return nil
}

// MayDeny refuses a caller who may not add or lift denies: a
// platform_admin's, since a deny overrides every grant.
func MayDeny(by *toolplane.Credential) error {
	if !by.HasRole(toolplane.RolePlatformAdmin, "") {
		return fmt.Errorf("%w: denies are a platform_admin's", toolplane.ErrForbidden)
	}
	return nil
}

// MayRead refuses a caller who may not read the organization's grants,
// denies and bundles: an agent_operator's, an auditor's or a
// platform_admin's, never an agent's (which learns what it may call from
// the tool listing).
func MayRead(by *toolplane.Credential) error {
	if !by.HasRole(toolplane.RoleAgentOperator, "") && !by.HasRole(toolplane.RoleAuditor, "") {
		return fmt.Errorf("%w: reading grants, denies and bundles needs the agent_operator, auditor or platform_admin role", toolplane.ErrForbidden)
	}
	return nil
}

// Grants answers the caller's organization's grants, of one agent when
// agentID is set, revoked ones included when asked; oldest first.
func (s *Service) Grants(ctx context.Context, agentID string, withRevoked bool, by *toolplane.Credential) ([]toolplane.Grant, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	return s.store.ListGrants(ctx, by.OrganizationID, agentID, withRevoked)
}

// Denies answers the caller's organization's denies.
func (s *Service) Denies(ctx context.Context, by *toolplane.Credential) ([]toolplane.Deny, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	return s.store.ListDenies(ctx, by.OrganizationID)
}

// Bundles answers the caller's organization's bundles.
func (s *Service) Bundles(ctx context.Context, by *toolplane.Credential) ([]toolplane.Bundle, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	return s.store.ListBundles(ctx, by.OrganizationID)
}

// AddGrant grants an agent identity a pattern or a bundle: an
// agent_operator's or a platform_admin's.
func (s *Service) AddGrant(ctx context.Context, g *toolplane.Grant, by *toolplane.Credential) error {
	return s.AddGrantWithID(ctx, toolplane.NewID("grt_"), g, by)
}

// AddGrantWithID is AddGrant giving the grant the ID id, for a grant
// named before it exists (the demo agent's, which first start makes); a
// caller's grant gets a fresh one from AddGrant. An ID already taken is
// refused by the store.
func (s *Service) AddGrantWithID(ctx context.Context, id string, g *toolplane.Grant, by *toolplane.Credential) error {
	if err := MayGrant(by); err != nil {
		return err
	}
	// Bounded first: every later refusal may quote what it refuses.
	if err := g.CheckBounds(); err != nil {
		return fmt.Errorf("%w: %w", toolplane.ErrInvalid, err)
	}
	if err := g.CheckTarget(); err != nil {
		return fmt.Errorf("%w: %v", toolplane.ErrInvalid, err)
	}
	if err := g.CheckSubject(); err != nil {
		return fmt.Errorf("%w: %v", toolplane.ErrInvalid, err)
	}
	switch {
	case !g.ForPeople() && (g.AgentID == "" || g.AgentID == toolplane.EveryAgent):
		return fmt.Errorf("%w: agent_id: name one agent identity (or, to grant a person, user_id or group)", toolplane.ErrInvalid)
	case g.Pattern != "":
		if err := checkPattern(g.Pattern, true); err != nil {
			return err
		}
	default:
		// Only a bundle that does not exist is the caller's mistake; a
		// store that does not answer is the platform's, and its text is
		// not the caller's to read.
		_, err := s.store.GetBundle(ctx, by.OrganizationID, g.Bundle)
		switch {
		case errors.Is(err, toolplane.ErrNotFound):
			return fmt.Errorf("%w: bundle %q does not exist", toolplane.ErrInvalid, g.Bundle)
		case err != nil:
			return fmt.Errorf("grant %s: bundle %q: %w", g.AgentID, g.Bundle, err)
		}
	}
	if !g.ExpiresAt.IsZero() && !g.ExpiresAt.After(s.now()) {
		return fmt.Errorf("%w: expires_at is already past", toolplane.ErrInvalid)
	}
	g.ID, g.OrganizationID, g.GrantedBy, g.CreatedAt = id, by.OrganizationID, by.Subject, s.now()
	g.RevokedAt, g.RevokedBy = time.Time{}, ""
	ch, ev := s.record(by, "grant.add", grantSubject(g), g)
	if err := s.store.InsertGrantAudited(ctx, g, ch, ev); err != nil {
		return fmt.Errorf("grant %s: %w", g.AgentID, err)
	}
	s.changed(by)
	return nil
}

// grantSubject names whom a grant is for in the change log: an agent by
// its id, a person as "user:<id>", a group as "group:<name>".
func grantSubject(g *toolplane.Grant) string {
	switch {
	case g.UserID != "":
		return "user:" + g.UserID
	case g.Group != "":
		return "group:" + g.Group
	}
	return g.AgentID
}

// RevokeGrant ends a grant.
func (s *Service) RevokeGrant(ctx context.Context, id string, by *toolplane.Credential) error {
	if err := MayGrant(by); err != nil {
		return err
	}
	ch, ev := s.record(by, "grant.revoke", id, map[string]string{"id": id})
	if err := s.store.RevokeGrantAudited(ctx, by.OrganizationID, id, by.Subject, ch.CreatedAt, ch, ev); err != nil {
		return fmt.Errorf("revoke grant %s: %w", id, err)
	}
	s.changed(by)
	return nil
}

// AddDeny refuses a pattern to one agent, or to every agent
// (toolplane.EveryAgent): a platform_admin's, since it overrides every
// grant.
func (s *Service) AddDeny(ctx context.Context, d *toolplane.Deny, by *toolplane.Credential) error {
	if err := MayDeny(by); err != nil {
		return err
	}
	if err := d.CheckBounds(); err != nil {
		return fmt.Errorf("%w: %w", toolplane.ErrInvalid, err)
	}
	if d.AgentID == "" {
		return fmt.Errorf("%w: agent_id: name an agent, or %q for every agent", toolplane.ErrInvalid, toolplane.EveryAgent)
	}
	if err := checkPattern(d.Pattern, false); err != nil {
		return err
	}
	if strings.TrimSpace(d.Reason) == "" {
		return fmt.Errorf("%w: a deny says why (reason)", toolplane.ErrInvalid)
	}
	d.ID, d.OrganizationID, d.CreatedBy, d.CreatedAt = toolplane.NewID("dny_"), by.OrganizationID, by.Subject, s.now()
	ch, ev := s.record(by, "deny.add", d.AgentID, d)
	if err := s.store.InsertDenyAudited(ctx, d, ch, ev); err != nil {
		return fmt.Errorf("deny %s: %w", d.Pattern, err)
	}
	s.changed(by)
	return nil
}

// LiftDeny removes a deny.
func (s *Service) LiftDeny(ctx context.Context, id string, by *toolplane.Credential) error {
	if err := MayDeny(by); err != nil {
		return err
	}
	ch, ev := s.record(by, "deny.lift", id, map[string]string{"id": id})
	if err := s.store.DeleteDenyAudited(ctx, by.OrganizationID, id, ch, ev); err != nil {
		return fmt.Errorf("lift deny %s: %w", id, err)
	}
	s.changed(by)
	return nil
}

// PutBundle creates or replaces a bundle of name@range references.
func (s *Service) PutBundle(ctx context.Context, b *toolplane.Bundle, by *toolplane.Credential) error {
	if err := MayGrant(by); err != nil {
		return err
	}
	if err := b.CheckBounds(); err != nil {
		return fmt.Errorf("%w: %w", toolplane.ErrInvalid, err)
	}
	if b.Name == "" || len(b.Refs) == 0 {
		return fmt.Errorf("%w: a bundle has a name and at least one tool reference", toolplane.ErrInvalid)
	}
	for _, r := range b.Refs {
		name, _ := semver.SplitRef(r)
		if strings.ContainsAny(name, "*?[") {
			return fmt.Errorf("%w: bundle reference %q: name tools exactly", toolplane.ErrInvalid, r)
		}
		if err := checkPattern(r, true); err != nil {
			return err
		}
	}
	b.OrganizationID, b.CreatedBy = by.OrganizationID, by.Subject
	b.CreatedAt, b.UpdatedAt = s.now(), s.now()
	ch, ev := s.record(by, "bundle.put", b.Name, b)
	if err := s.store.PutBundleAudited(ctx, b, ch, ev); err != nil {
		return fmt.Errorf("bundle %s: %w", b.Name, err)
	}
	s.changed(by)
	return nil
}

// record answers the change record and the audit event (kind grant) of
// by's change of kind to subject, detail its content: the store writes
// both in the change's transaction, so a grant never stands, nor a deny
// is lifted, without them.
func (s *Service) record(by *toolplane.Credential, kind, subject string, detail any) (*toolplane.Change, *toolplane.AuditEvent) {
	body, _ := json.Marshal(detail)
	c := &toolplane.Change{ID: toolplane.NewID("chg_"), OrganizationID: by.OrganizationID, Kind: kind, Subject: subject,
		Actor: by.Subject, Detail: body, CreatedAt: s.now()}
	ev := toolplane.ControlEvent(by, toolplane.AuditGrant, changeOutcomes[kind], subject, c.CreatedAt)
	ev.Reason = changeReason(detail)
	return c, ev
}

// changed drops this node's cached view of by's organization after a
// change was stored, so its next decision sees the change, and tells the
// watchers.
func (s *Service) changed(by *toolplane.Credential) {
	s.mu.Lock()
	delete(s.cache, by.OrganizationID)
	watchers := slices.Clone(s.watchers)
	s.mu.Unlock()
	for _, fn := range watchers {
		fn()
	}
}

// changeOutcomes are the audit outcomes of the change log's kinds.
var changeOutcomes = map[string]string{
	"grant.add":    "granted",
	"grant.revoke": "revoked",
	"deny.add":     "denied",
	"deny.lift":    "deny_lifted",
	"bundle.put":   "bundle_saved",
}

// changeReason says what a change gave or took, for its audit event:
// the pattern or bundle granted, the pattern denied and why, the grant
// revoked.
func changeReason(detail any) string {
	switch d := detail.(type) {
	case *toolplane.Grant:
		if d.Pattern != "" {
			return "pattern " + d.Pattern
		}
		return "bundle " + d.Bundle
	case *toolplane.Deny:
		return "pattern " + d.Pattern + ": " + d.Reason
	case *toolplane.Bundle:
		return "bundle " + d.Name
	case map[string]string:
		return "id " + d["id"]
	}
	return ""
}

// load answers the organization's view, read again when it may be stale.
func (s *Service) load(ctx context.Context, org string) (*view, error) {
	now := s.now()
	s.mu.Lock()
	v := s.cache[org]
	fresh := v != nil && now.Sub(v.checked) < recheck // checked is written under mu
	s.mu.Unlock()
	if fresh {
		return v, nil
	}
	rev, err := s.store.AuthzRevision(ctx, org)
	if err != nil {
		return nil, fmt.Errorf("grants revision: %w", err)
	}
	if v != nil && v.rev == rev {
		s.mu.Lock()
		v.checked = now
		s.mu.Unlock()
		return v, nil
	}
	grants, err := s.store.ListGrants(ctx, org, "", false)
	if err != nil {
		return nil, fmt.Errorf("grants: %w", err)
	}
	denies, err := s.store.ListDenies(ctx, org)
	if err != nil {
		return nil, fmt.Errorf("denies: %w", err)
	}
	bundles, err := s.store.ListBundles(ctx, org)
	if err != nil {
		return nil, fmt.Errorf("bundles: %w", err)
	}
	nv := &view{rev: rev, checked: now, grants: map[string][]toolplane.Grant{}, denies: denies, bundles: map[string]toolplane.Bundle{},
		users: map[string][]toolplane.Grant{}, groups: map[string][]toolplane.Grant{}}
	for _, g := range grants {
		switch {
		case g.UserID != "":
			nv.users[g.UserID] = append(nv.users[g.UserID], g)
			nv.people++
		case g.Group != "":
			nv.groups[g.Group] = append(nv.groups[g.Group], g)
			nv.people++
		default:
			nv.grants[g.AgentID] = append(nv.grants[g.AgentID], g)
		}
	}
	for _, b := range bundles {
		nv.bundles[b.Name] = b
	}
	s.mu.Lock()
	s.cache[org] = nv
	s.mu.Unlock()
	return nv, nil
}

// Why is what allows or refuses one tool to an agent.
type Why struct {
	Tool string `json:"tool"`
	// Range is the version range the allowing grant pins ("" for any);
	// Version the version it resolves to now.
	Range   string `json:"range,omitempty"`
	Version string `json:"version,omitempty"`
	// Grant is the allowing grant: its id, what it names (pattern or
	// bundle), who granted it and until when.
	Grant     string    `json:"grant,omitempty"`
	Via       string    `json:"via,omitempty"`
	GrantedBy string    `json:"granted_by,omitempty"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// DeniedBy is the deny refusing the tool despite the grant.
	DeniedBy string `json:"denied_by,omitempty"`
}

// match answers what in v allows (or denies) tool name to agent for tenant
// now. allow is nil when nothing allows it.
func (s *Service) match(v *view, agent, tenant, name string) (allow *Why, deny *toolplane.Deny) {
	return s.matchIn(v, v.grants[agent], tenant, name), v.deny(agent, name)
}

// matchIn answers why the grant of grants that allows tool name for
// tenant now (see grantFor) allows it, or nil.
func (s *Service) matchIn(v *view, grants []toolplane.Grant, tenant, name string) *Why {
	g, rng := s.grantFor(v, grants, tenant, name)
	if g == nil {
		return nil
	}
	via := g.Pattern
	if g.Bundle != "" {
		via = "bundle " + g.Bundle
	}
	return &Why{Tool: name, Range: rng, Grant: g.ID, Via: via, GrantedBy: g.GrantedBy, ExpiresAt: g.ExpiresAt}
}

// grantFor answers the grant of grants that allows tool name for tenant
// now (a pinned one over an unpinned one) and the range it pins, or nil.
// It builds nothing: a call's decision needs only the range, and an
// explanation (matchIn) is built once, for the grant that wins.
func (s *Service) grantFor(v *view, grants []toolplane.Grant, tenant, name string) (*toolplane.Grant, string) {
	now := s.now()
	var best *toolplane.Grant
	var bestRange string
	for i := range grants {
		g := &grants[i]
		if !g.ExpiresAt.IsZero() && !now.Before(g.ExpiresAt) {
			continue
		}
		if len(g.TenantScope) > 0 && !slices.Contains(g.TenantScope, tenant) {
			continue
		}
		refs := []string{g.Pattern}
		if g.Bundle != "" {
			refs = v.bundles[g.Bundle].Refs
		}
		for _, r := range refs {
			pat, rng := semver.SplitRef(r)
			if ok, _ := path.Match(pat, name); ok {
				// The most specific allowing grant wins: a pinned one
				// over an unpinned one.
				if best == nil || (bestRange == "" && rng != "") {
					best, bestRange = g, rng
				}
			}
		}
	}
	return best, bestRange
}

// Pin answers whether the agent's grants allow the tool named now, denies
// applied, and the range the allowing grant pins ("" for any).
func (s *Service) Pin(ctx context.Context, org, agent, tenant, name string) (string, bool, error) {
	v, err := s.load(ctx, org)
	if err != nil {
		return "", false, err
	}
	g, rng := s.grantFor(v, v.grants[agent], tenant, name)
	if g == nil || v.deny(agent, name) != nil {
		return "", false, nil
	}
	return rng, true, nil
}

// Pins answers the tools the agent's grants allow now, each with the range
// its grant pins ("" for any), denies applied.
func (s *Service) Pins(ctx context.Context, org, agent, tenant string) (map[string]string, error) {
	v, err := s.load(ctx, org)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, t := range s.reg.Tools(org) {
		if g, rng := s.grantFor(v, v.grants[agent], tenant, t.Def.Name); g != nil && v.deny(agent, t.Def.Name) == nil {
			out[t.Def.Name] = rng
		}
	}
	return out, nil
}

// deny answers the deny refusing name to agent (its own or every agent's),
// or nil.
func (v *view) deny(agent, name string) *toolplane.Deny {
	for i := range v.denies {
		d := &v.denies[i]
		if d.AgentID != agent && d.AgentID != toolplane.EveryAgent {
			continue
		}
		if ok, _ := path.Match(d.Pattern, name); ok {
			return d
		}
	}
	return nil
}

// MayExplain refuses a caller who may not have an agent's grants
// explained: an agent_operator's, an auditor's or a platform_admin's, as
// for reading the grants themselves.
func MayExplain(by *toolplane.Credential) error {
	if by == nil || !by.HasAnyRole(toolplane.RoleAgentOperator, toolplane.RoleAuditor) {
		return toolplane.Refuse(by, nil, "explaining grants needs the agent_operator, auditor or platform_admin role")
	}
	return nil
}

// Explain answers, for every tool in the caller's organization's
// catalogue that a grant of the agent names, which grant allows it, at
// which version, or which deny refuses it: "which agents can delete a
// customer record, and who allowed it" is this, per agent. The caller must
// be allowed (MayExplain; a refusal is a *toolplane.DeniedError, a
// toolplane.ErrForbidden).
func (s *Service) Explain(ctx context.Context, agent string, by *toolplane.Credential) ([]Why, error) {
	if err := MayExplain(by); err != nil {
		return nil, err
	}
	org := by.OrganizationID
	v, err := s.load(ctx, org)
	if err != nil {
		return nil, err
	}
	var out []Why
	for _, t := range s.reg.Tools(org) {
		allow, deny := s.match(v, agent, "", t.Def.Name)
		if allow == nil {
			continue
		}
		w := *allow
		if tool, ok := s.reg.Resolve(org, t.Def.Name, w.Range); ok {
			w.Version = tool.Def.Version
		}
		if deny != nil {
			w.DeniedBy = fmt.Sprintf("%s (%s: %s)", deny.ID, deny.Pattern, deny.Reason)
		}
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool < out[j].Tool })
	return out, nil
}

// Policy decides calls on the grants as they are at the decision: a deny
// (the agent's or every agent's) refuses; so does a tool no grant of the
// agent allows, a version outside the range the grant pins, or a tool the
// calling key does not admit (the principal, which the invoker computed as
// the grants intersected with the key's rights, see Principals). A call
// made for a person (Invocation.UserID) also needs a grant of that person
// or of one of their groups (delegated authority: only what both may do).
// A tool annotated requires_approval then needs a person's approval.
type Policy struct {
	Service *Service
}

// Decide implements policy.Policy.
func (p Policy) Decide(ctx context.Context, in policy.Input) (policy.Decision, error) {
	v, err := p.Service.load(ctx, in.Invocation.OrganizationID)
	if err != nil {
		return policy.Decision{}, err
	}
	return p.decide(v, in)
}

// ErrNoLastKnown is DecideLastKnown's answer when this node holds no view
// of the organization's grants read recently enough.
var ErrNoLastKnown = errors.New("authz: no recent view of the grants on this node")

// DecideLastKnown decides as Decide does, from this node's last view of
// the organization's grants and without reading the store, provided that
// view was read (or confirmed current) within maxAge; otherwise it
// answers ErrNoLastKnown. It is what a fail-open read-only tool is decided
// by while the store cannot be read.
func (p Policy) DecideLastKnown(in policy.Input, maxAge time.Duration) (policy.Decision, error) {
	s := p.Service
	s.mu.Lock()
	v := s.cache[in.Invocation.OrganizationID]
	ok := v != nil && s.now().Sub(v.checked) <= maxAge
	s.mu.Unlock()
	if !ok {
		return policy.Decision{}, ErrNoLastKnown
	}
	return p.decide(v, in)
}

func (p Policy) decide(v *view, in policy.Input) (policy.Decision, error) {
	inv, name := in.Invocation, in.Tool.Name
	allow, deny := p.Service.match(v, inv.AgentID, inv.TenantID, name)
	switch {
	case deny != nil:
		return policy.Decision{Effect: policy.Deny, Reason: fmt.Sprintf("%s is denied (%s)", name, deny.Reason)}, nil
	case allow == nil:
		return policy.Decision{Effect: policy.Deny, Reason: fmt.Sprintf("no grant allows %s", name)}, nil
	case !inv.Principal.Holds(name):
		return policy.Decision{Effect: policy.Deny, Reason: fmt.Sprintf("the calling key's rights do not include %s", name)}, nil
	}
	if !inRange(allow.Range, in.Tool.Version) {
		// A grant pinned to a range allows only the versions in it.
		return policy.Decision{Effect: policy.Deny, Reason: fmt.Sprintf("%s %s is outside the granted range %s", name, in.Tool.Version, allow.Range)}, nil
	}
	if inv.UserID != "" {
		if why := p.Service.userMay(v, inv, name, in.Tool.Version); why != "" {
			return policy.Decision{Effect: policy.Deny, Reason: why}, nil
		}
	}
	if in.Tool.Annotations.RequiresApproval {
		return policy.Decision{Effect: policy.RequireApproval, Reason: fmt.Sprintf("%s requires a person's approval", name)}, nil
	}
	return policy.Decision{Effect: policy.Allow, Reason: "granted"}, nil
}

// inRange reports whether version is within rng ("" is any).
func inRange(rng, version string) bool {
	if rng == "" {
		return true
	}
	r, err := semver.ParseRange(rng)
	ver, perr := semver.Parse(version)
	return err == nil && perr == nil && r.Contains(ver)
}

// userMay answers why the person a delegated call acts for may not call
// the tool at this version, or "" when they may: one of their own grants,
// or of a group their claims place them in, allows it (tenant scope,
// expiry and pinned range applied as for an agent's).
//
// An organization that grants people nothing refuses every delegated
// call: "only what the person may do" is then nothing the platform can
// vouch for, and calling as the agent alone would let whoever names a
// person borrow the agent's wider rights in that person's name. The
// refusal says what to configure.
func (s *Service) userMay(v *view, inv *toolplane.Invocation, name, version string) string {
	if v.people == 0 {
		return fmt.Sprintf("this call acts for %s, and this organization grants people no tools yet, so what %s may do is unknown: grant the person (user_id) or a group of theirs (group) %s", inv.UserID, inv.UserID, name)
	}
	// Clipped once, so the first append copies out of the shared view and
	// the rest grow that copy: not a new copy per group.
	grants := slices.Clip(v.users[inv.UserID])
	if u := inv.User; u != nil {
		for _, g := range u.Groups {
			grants = append(grants, v.groups[g]...)
		}
	}
	g, rng := s.grantFor(v, grants, inv.TenantID, name)
	switch {
	case g == nil:
		return fmt.Sprintf("this call acts for %s, who is not granted %s; an agent acting for a person may do only what both may", inv.UserID, name)
	case !inRange(rng, version):
		return fmt.Sprintf("this call acts for %s, whose grant of %s allows only %s, not %s", inv.UserID, name, rng, version)
	}
	return ""
}
