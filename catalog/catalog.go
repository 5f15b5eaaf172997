// Package catalog is the lifecycle of published tool versions: publishing
// behind the compatibility gate, review routing, review decisions,
// deprecation, retirement and the sunset rule, each enforced against the
// caller's role and recorded in the change log. It keeps the registry in
// step with the store, on every node.
//
// Published versions belong to an organization: every operation acts in
// the caller's organization only, and a version of another organization
// answers as one that does not exist (toolplane.ErrNotFound), never as one
// the caller may not touch, so its existence is not disclosed.
//
// The service refuses with toolplane's error vocabulary:
// toolplane.ErrForbidden when the caller's roles do not allow the
// operation; toolplane.ErrConflict when the version was published or
// changed by someone else first (ErrTransition when its lifecycle state
// does not allow the operation); toolplane.ErrInvalid when the definition
// or the request is not acceptable, the error saying why (a
// *registry.CheckError or a *compat.Violation is wrapped when one of them
// refused it).
package catalog

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/compat"
	"github.com/toolplane/toolplane/cursor"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/semver"
)

// ErrTransition: the version's lifecycle state does not allow the
// operation. It refines toolplane.ErrTransition (a conflict), so every
// door answers it with the code of a refused transition without knowing
// the catalogue.
var ErrTransition = toolplane.Refine(toolplane.ErrTransition, "transition not allowed")

// Group is the registry group published versions are served in, each in
// its own organization.
const Group = "published"

// reviewTags are tags that always send a version to review.
var reviewTags = []string{"pii", "finance", "external-network-write"}

// Store is what the service keeps its state in.
type Store interface {
	toolplane.CatalogStore
	AppendChange(ctx context.Context, c *toolplane.Change) error
	ListChanges(ctx context.Context, org, kind, subject, after string, limit int) ([]toolplane.Change, string, error)
	ListAudit(ctx context.Context, org string, filter toolplane.AuditFilter, after string, limit int) ([]toolplane.AuditEvent, string, error)
}

// Service runs the lifecycle.
type Service struct {
	store Store
	reg   *registry.Registry
	opt   registry.Options
	log   *slog.Logger
	now   func() time.Time

	mu       sync.Mutex // serialises Refresh
	revision int64
	loaded   bool
}

// Config wires a Service.
type Config struct {
	Store    Store
	Registry *registry.Registry
	// Options are the registration checks' bindings and ceilings.
	Options registry.Options
	Logger  *slog.Logger
	Now     func() time.Time
}

// New answers a service.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{store: cfg.Store, reg: cfg.Registry, opt: cfg.Options, log: cfg.Logger, now: cfg.Now}
}

// DefaultOrganization is the organization of a credential that names none.
const DefaultOrganization = "default"

// orgOf answers the organization a caller acts in.
func orgOf(by *toolplane.Credential) string {
	if by == nil || by.OrganizationID == "" {
		return DefaultOrganization
	}
	return by.OrganizationID
}

// MayRead refuses a caller who may not read the organization's catalogue:
// it is its people's (owners, publishers, reviewers, auditors), never an
// agent's, which sees only the tools it may call, through the tool
// listing.
func MayRead(by *toolplane.Credential) error {
	if by == nil || by.Kind != toolplane.CredentialPerson {
		return fmt.Errorf("%w: the catalogue is read with a person's credential; an agent lists the tools it may call", toolplane.ErrForbidden)
	}
	return nil
}

// List answers the caller's organization's versions f matches, after the
// cursor.
func (s *Service) List(ctx context.Context, f toolplane.VersionFilter, after string, limit int, by *toolplane.Credential) ([]toolplane.ToolVersion, string, error) {
	if err := MayRead(by); err != nil {
		return nil, "", err
	}
	org := orgOf(by)
	if name, ok := strings.CutPrefix(after, platformCursor); ok {
		// The published versions are behind: page on through the
		// platform's tools.
		last, err := base64.RawURLEncoding.DecodeString(name)
		if err != nil {
			return nil, "", fmt.Errorf("list versions: %w", cursor.ErrMalformed)
		}
		vs, next := s.platform(org, f, string(last), limit)
		return vs, next, nil
	}
	vs, next, err := s.store.ListToolVersions(ctx, org, f, after, limit)
	if err != nil {
		// A cursor the store could not decode stays a
		// toolplane.ErrBadCursor: the caller's mistake.
		return nil, "", fmt.Errorf("list versions: %w", err)
	}
	for i := range vs {
		vs[i].Source = toolplane.SourcePublished
	}
	if next != "" || (limit > 0 && len(vs) >= limit) {
		if more, _ := s.platform(org, f, "", 1); next == "" && len(more) > 0 {
			// A full last page of published versions: the platform's
			// tools start on the next.
			next = platformCursor
		}
		return vs, next, nil
	}
	more, next := s.platform(org, f, "", limit-len(vs))
	return append(vs, more...), next, nil
}

// platformCursor starts the cursor of a listing's pages of platform
// tools. The stores' cursors are base64url, which holds no '.', so the two
// are never taken for each other.
const platformCursor = "platform."

// platform answers, as versions, the platform's own tools (built-in and
// ingested from upstreams) org is served that f matches, by name after
// after, at most limit (none when limit is not positive), and the cursor
// of the next page ("" after the last). A listing shows them after the
// published versions, so a catalogue serving only the platform's tools
// does not look empty; they are active, have no review and no owner
// unless their definition names one.
func (s *Service) platform(org string, f toolplane.VersionFilter, after string, limit int) ([]toolplane.ToolVersion, string) {
	if s.reg == nil || limit <= 0 {
		return nil, ""
	}
	if len(f.States) > 0 && !slices.Contains(f.States, toolplane.StateActive) {
		return nil, ""
	}
	var out []toolplane.ToolVersion
	for _, t := range s.reg.Tools(org) {
		if t.Def.Name <= after || (f.Name != "" && t.Def.Name != f.Name) || (f.Owner != "" && t.Def.Owner != f.Owner) {
			continue
		}
		v, ok := s.platformVersion(org, t)
		if !ok {
			continue
		}
		if len(out) == limit {
			return out, platformCursor + base64.RawURLEncoding.EncodeToString([]byte(out[len(out)-1].Name))
		}
		out = append(out, v)
	}
	return out, ""
}

// platformVersion answers t as a version when it is one of the platform's
// own tools in org's view, not a published version.
func (s *Service) platformVersion(org string, t *registry.Tool) (toolplane.ToolVersion, bool) {
	group := s.reg.GroupOf(org, t.Def.Name)
	if group == Group {
		return toolplane.ToolVersion{}, false
	}
	def, err := json.Marshal(t.Def)
	if err != nil {
		// A definition the registry checked always encodes.
		def = nil
	}
	v := toolplane.ToolVersion{OrganizationID: org, Name: t.Def.Name, Version: t.Def.Version, State: t.State, Definition: def,
		SchemaHash: t.Def.SchemaHash, Owner: t.Def.Owner, Source: toolplane.SourceBuiltIn}
	if group != "" {
		v.Source, v.Upstream = toolplane.SourceUpstream, group
	}
	return v, true
}

// Get answers one version of the caller's organization, or
// toolplane.ErrNotFound.
func (s *Service) Get(ctx context.Context, name, version string, by *toolplane.Credential) (*toolplane.ToolVersion, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	v, err := s.store.GetToolVersion(ctx, orgOf(by), name, version)
	if errors.Is(err, toolplane.ErrNotFound) && s.reg != nil {
		// Not published: one of the platform's own tools, when it serves
		// the organization that version.
		if t, ok := s.reg.Get(orgOf(by), name); ok && t.Def.Version == version {
			if pv, ok := s.platformVersion(orgOf(by), t); ok {
				return &pv, nil
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", name, version, err)
	}
	v.Source = toolplane.SourcePublished
	return v, nil
}

// MayReadChanges refuses a caller who may not read the organization's
// change log (every change to the catalogue, the grants and the upstream
// settings, and who made it): it is an auditor's (platform_admin holds
// every role).
func MayReadChanges(by *toolplane.Credential) error {
	if by == nil || !by.HasAnyRole(toolplane.RoleAuditor) {
		return toolplane.Refuse(by, nil, "the change log needs the auditor role")
	}
	return nil
}

// Changes answers the caller's organization's change log, newest first,
// of one kind and subject when they are set, after the cursor, to an
// auditor (MayReadChanges; a refusal is a *toolplane.DeniedError, a
// toolplane.ErrForbidden). A cursor the store cannot decode stays a
// toolplane.ErrBadCursor.
func (s *Service) Changes(ctx context.Context, kind, subject, after string, limit int, by *toolplane.Credential) ([]toolplane.Change, string, error) {
	if err := MayReadChanges(by); err != nil {
		return nil, "", err
	}
	cs, next, err := s.store.ListChanges(ctx, by.OrganizationID, kind, subject, after, limit)
	if err != nil {
		return nil, "", fmt.Errorf("list changes: %w", err)
	}
	return cs, next, nil
}

// MayPublish refuses, before a definition is even read, a caller who can
// publish nothing: one who is not a person holding tool_owner or
// tool_publisher of some team (or platform_admin). Publish decides the
// definition's own team.
func MayPublish(by *toolplane.Credential) error {
	if by.HasRoleInAnyTeam(toolplane.RoleToolOwner, toolplane.RoleToolPublisher) {
		return nil
	}
	return fmt.Errorf("%w: publishing needs the tool_owner or tool_publisher role of a team", toolplane.ErrForbidden)
}

// MayChange refuses, before a version is even read, a caller who can move
// no version through its lifecycle: one who is not a person holding
// tool_owner of some team or platform_admin. Each operation then decides
// on the version's own team.
func MayChange(by *toolplane.Credential) error {
	if by.HasRoleInAnyTeam(toolplane.RoleToolOwner) {
		return nil
	}
	return fmt.Errorf("%w: changing a version needs the tool_owner role of its team or platform_admin", toolplane.ErrForbidden)
}

// Publication is what Publish answers.
type Publication struct {
	Version *toolplane.ToolVersion
	// Report is the compatibility report against the previous version (nil
	// for a first publish or a new major).
	Report *compat.Report
}

// Publish stores a new version of a definition. A first publish, or a new
// major, needs the owning team's tool_owner; a patch or minor, its
// tool_owner or tool_publisher. The definition must pass the registration
// checks, and a patch or minor must pass the compatibility gate against
// the version below it. Self-service versions are active at once; others
// wait in review, with the reasons.
func (s *Service) Publish(ctx context.Context, d toolplane.Definition, by *toolplane.Credential) (*Publication, error) {
	if err := MayPublish(by); err != nil {
		return nil, err
	}
	// Bounded before anything else reads them: every later refusal may
	// name the tool, and none may quote an unbounded value back.
	if err := errors.Join(toolplane.CheckLen("name", d.Name, toolplane.MaxNameLen), toolplane.CheckLen("version", d.Version, toolplane.MaxRefLen),
		toolplane.CheckLen("owner", d.Owner, toolplane.MaxRefLen)); err != nil {
		return nil, fmt.Errorf("%w: %w", toolplane.ErrInvalid, err)
	}
	org := orgOf(by)
	if d.Owner == "" {
		return nil, fmt.Errorf("%w: owner: name the owning team", toolplane.ErrInvalid)
	}
	v, err := semver.Parse(d.Version)
	if err != nil {
		return nil, fmt.Errorf("%w: version: %v", toolplane.ErrInvalid, err)
	}
	// The registration checks, as any definition takes them; a published
	// tool may not take a built-in or ingested tool's name.
	opt := s.opt
	for _, t := range s.reg.Tools(org) {
		if s.reg.GroupOf(org, t.Def.Name) != Group {
			opt.Registered = append(opt.Registered, t.Def.Name)
		}
	}
	if _, err := registry.Check([]toolplane.Definition{d}, opt); err != nil {
		return nil, fmt.Errorf("%w: %w", toolplane.ErrInvalid, err)
	}
	if err := s.namespace(&d, by); err != nil {
		return nil, err
	}
	if err := s.holdsBinding(&d); err != nil {
		return nil, err
	}

	existing, err := s.versions(ctx, org, d.Name)
	if err != nil {
		return nil, err
	}
	pub := &Publication{}
	prev := below(existing, v)
	switch {
	case len(existing) == 0:
		if !by.HasRole(toolplane.RoleToolOwner, d.Owner) {
			return nil, fmt.Errorf("%w: the first version of a tool is published by a tool_owner of %s", toolplane.ErrForbidden, d.Owner)
		}
	default:
		if owner := existing[0].Owner; owner != d.Owner {
			return nil, fmt.Errorf("%w: owner: %s is owned by %s; a version cannot move it to %s", toolplane.ErrInvalid, d.Name, owner, d.Owner)
		}
		if prev == nil || prev.ver.Major() != v.Major() {
			// A new major coexists with the old; it needs the owner.
			if !by.HasRole(toolplane.RoleToolOwner, d.Owner) {
				return nil, fmt.Errorf("%w: a new major version is published by a tool_owner of %s", toolplane.ErrForbidden, d.Owner)
			}
			break
		}
		if !by.HasRole(toolplane.RoleToolOwner, d.Owner) && !by.HasRole(toolplane.RoleToolPublisher, d.Owner) {
			return nil, fmt.Errorf("%w: publishing %s needs tool_owner or tool_publisher of %s", toolplane.ErrForbidden, d.Name, d.Owner)
		}
		var old toolplane.Definition
		if err := json.Unmarshal(prev.Definition, &old); err != nil {
			return nil, fmt.Errorf("read %s %s: %w", prev.Name, prev.Version, err)
		}
		rep, err := compat.Classify(&old, &d)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", toolplane.ErrInvalid, err)
		}
		if err := compat.Gate(&old, &d, rep); err != nil {
			return nil, fmt.Errorf("%w: %w", toolplane.ErrInvalid, err)
		}
		pub.Report = &rep
	}

	hash, err := registry.SchemaHash(&d)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", toolplane.ErrInvalid, err)
	}
	d.SchemaHash = hash
	body, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	reasons, err := s.reviewReasons(ctx, org, &d)
	if err != nil {
		return nil, err
	}
	state := toolplane.StateActive
	if len(reasons) > 0 {
		state = toolplane.StateInReview
	}
	now := s.now()
	tv := &toolplane.ToolVersion{OrganizationID: org, Name: d.Name, Version: d.Version, State: state, Definition: body, SchemaHash: hash, Owner: d.Owner,
		ReviewReasons: reasons, PublishedBy: by.Subject, PublishedAt: now, UpdatedAt: now}
	if err := s.store.InsertToolVersion(ctx, tv); err != nil {
		if errors.Is(err, toolplane.ErrExists) {
			return nil, fmt.Errorf("%w: %s %s is already published", toolplane.ErrConflict, d.Name, d.Version)
		}
		return nil, fmt.Errorf("publish %s %s: %w", d.Name, d.Version, err)
	}
	s.record(ctx, by, "version.publish", tv, map[string]any{"state": state, "review_reasons": reasons})
	pub.Version = tv
	return pub, s.Refresh(ctx)
}

// reviewReasons answers why d needs a person's review: it is destructive
// or binds a guarded handler or remote tool, carries a sensitive tag, is
// in a platform namespace, has text addressed to the model, or its team
// has no active tool yet in the organization (trust is earned once, by
// review). None means self-service.
func (s *Service) reviewReasons(ctx context.Context, org string, d *toolplane.Definition) ([]string, error) {
	var reasons []string
	if d.Annotations.Destructive {
		reasons = append(reasons, "destructive")
	}
	// Binding a guarded handler is as destructive as the tool that
	// declares it, whatever this definition says of itself.
	if f, ok := s.reg.Floor(d.Binding); ok && f.Guarded() {
		reasons = append(reasons, fmt.Sprintf("binds guarded %s (%s, declared by %s)", f.Binding, f.Why(), strings.Join(f.Declared, ", ")))
	}
	if ns := namespaceOf(d.Name); s.reserved(ns) {
		reasons = append(reasons, "platform namespace "+ns)
	}
	for _, in := range registry.Instructions(d) {
		reasons = append(reasons, "instructions to the model in "+in.String())
	}
	for _, tag := range reviewTags {
		if slices.Contains(d.Tags, tag) {
			reasons = append(reasons, "tag:"+tag)
		}
	}
	if why, err := s.newRequest(ctx, org, d); err != nil {
		return nil, err
	} else if why != "" {
		reasons = append(reasons, why)
	}
	// Any active version counts, an earlier one of this tool included: a
	// new version of a tool already trusted does not start over.
	active, _, err := s.store.ListToolVersions(ctx, org, toolplane.VersionFilter{Owner: d.Owner, States: []toolplane.VersionState{toolplane.StateActive}}, "", 1)
	if err != nil {
		return nil, fmt.Errorf("active tools of %s: %w", d.Owner, err)
	}
	if len(active) == 0 {
		reasons = append(reasons, "first tool of team "+d.Owner)
	}
	return reasons, nil
}

// newRequest answers why a tool the platform runs itself (an HTTP
// request, a SQL statement) needs review: it makes a request through the
// organization's connection to the provider it names, with the secret
// that connection holds, so a request no person has looked at — a first
// version, or one whose request or provider differs from every active
// version's — is reviewed. "" when an active version already makes the
// same request.
func (s *Service) newRequest(ctx context.Context, org string, d *toolplane.Definition) (string, error) {
	if !d.Binding.Platform() {
		return "", nil
	}
	want, err := json.Marshal(requestOf(d))
	if err != nil {
		return "", err
	}
	active, _, err := s.store.ListToolVersions(ctx, org, toolplane.VersionFilter{Name: d.Name, States: []toolplane.VersionState{toolplane.StateActive, toolplane.StateDeprecated}}, "", 100)
	if err != nil {
		return "", fmt.Errorf("active versions of %s: %w", d.Name, err)
	}
	for _, v := range active {
		var old toolplane.Definition
		if json.Unmarshal(v.Definition, &old) != nil {
			continue
		}
		have, err := json.Marshal(requestOf(&old))
		if err == nil && string(have) == string(want) {
			return "", nil
		}
	}
	return fmt.Sprintf("a new request through connection %s (its %s binding)", d.Connection, d.Binding.Kind()), nil
}

// request is what a tool the platform runs sends through its connection:
// the binding, the provider, the effect and, for an HTTP request, the
// arguments it accepts (they reach the request's path, query, headers
// and body, so a wider input is a new request). A SQL statement binds only
// the parameters its text names, so its input schema is left out.
type request struct {
	Binding    toolplane.Binding
	Connection string
	Effect     toolplane.Effect
	Input      json.RawMessage `json:",omitempty"`
}

// requestOf answers the request d makes.
func requestOf(d *toolplane.Definition) request {
	r := request{Binding: d.Binding, Connection: d.Connection, Effect: d.Effect}
	if d.Binding.HTTP != nil {
		var v any
		if json.Unmarshal(d.InputSchema, &v) == nil {
			// Compared by content, not by how the file spelled it.
			r.Input, _ = json.Marshal(v)
		}
	}
	return r
}

// PlatformNamespace is the namespace of tools ingested from MCP servers;
// with the namespaces of the deployment's built-in tools it is reserved
// for the platform.
const PlatformNamespace = "mcp"

// namespaceOf answers the first segment of a tool name: its namespace.
func namespaceOf(name string) string {
	ns, _, _ := strings.Cut(name, ".")
	return ns
}

// reserved reports whether a namespace belongs to the platform: mcp, and
// the namespace of every built-in or ingested tool (every tool the
// registry holds outside the published group).
func (s *Service) reserved(ns string) bool {
	if ns == PlatformNamespace {
		return true
	}
	for _, t := range s.reg.Platform() {
		if namespaceOf(t.Def.Name) == ns {
			return true
		}
	}
	return false
}

// namespace enforces who publishes under a name. A team publishes only
// under its own namespace: the name's first segment is the owning team.
// A platform namespace (see reserved) is published in by a platform_admin
// only, whatever the owner, since its tools share a namespace (and, to an
// agent's grant such as demo.*, an identity) with the platform's own.
func (s *Service) namespace(d *toolplane.Definition, by *toolplane.Credential) error {
	ns := namespaceOf(d.Name)
	if s.reserved(ns) {
		if !by.HasRole(toolplane.RolePlatformAdmin, "") {
			return fmt.Errorf("%w: %s is a platform namespace (built-in or ingested tools); only a platform_admin publishes in it", toolplane.ErrForbidden, ns)
		}
		return nil
	}
	if ns != d.Owner {
		return fmt.Errorf("%w: name: a team publishes under its own namespace; %s is owned by %s, so name it %s.<verb>", toolplane.ErrInvalid, d.Name, d.Owner, d.Owner)
	}
	return nil
}

// holdsBinding refuses a definition weaker than the platform's own
// declaration of the handler or remote tool it binds (invariant 9): a
// refusal names each weaker field and the binding, so the publisher can
// state what the binding needs. Refused rather than sent to review: a
// reviewer could not make it safe, since the registry would serve it
// raised to the binding's declaration anyway.
func (s *Service) holdsBinding(d *toolplane.Definition) error {
	f, ok := s.reg.Floor(d.Binding)
	if !ok {
		return nil
	}
	if _, problems := f.Hold(*d); len(problems) > 0 {
		return fmt.Errorf("%w: %w", toolplane.ErrInvalid, &registry.CheckError{Problems: problems})
	}
	return nil
}

// Review decides a version in review: approved, it is active; rejected,
// it goes back to its owner (pending_approval) with the note. Reviews are
// a platform_admin's, and the publisher of a version never approves it.
func (s *Service) Review(ctx context.Context, name, version string, approve bool, note string, by *toolplane.Credential) (*toolplane.ToolVersion, error) {
	kind, decide, err := s.reviewer(approve, note, by)
	if err != nil {
		return nil, err
	}
	return s.transition(ctx, name, version, kind, note, by, decide(name, version))
}

// reviewer checks what every review decision by by needs (the role, the
// note) and answers the change's kind and the edit deciding one version.
func (s *Service) reviewer(approve bool, note string, by *toolplane.Credential) (string, func(name, version string) func(*toolplane.ToolVersion) error, error) {
	if !by.HasRole(toolplane.RolePlatformAdmin, "") {
		return "", nil, fmt.Errorf("%w: versions are reviewed by a platform_admin", toolplane.ErrForbidden)
	}
	if err := toolplane.CheckLen("note", note, toolplane.MaxReasonLen); err != nil {
		return "", nil, fmt.Errorf("%w: %w", toolplane.ErrInvalid, err)
	}
	if !approve && strings.TrimSpace(note) == "" {
		return "", nil, fmt.Errorf("%w: a rejection says why (note)", toolplane.ErrInvalid)
	}
	kind, to := "version.approve", toolplane.StateActive
	if !approve {
		kind, to = "version.reject", toolplane.StatePendingApproval
	}
	return kind, func(name, version string) func(*toolplane.ToolVersion) error {
		return func(v *toolplane.ToolVersion) error {
			if v.State != toolplane.StateInReview {
				return fmt.Errorf("%w: %s %s is %s; only a version in review is approved or rejected", ErrTransition, name, version, v.State)
			}
			if by.Subject == v.PublishedBy && approve {
				return fmt.Errorf("%w: %s %s was published by %s, who does not approve it", toolplane.ErrForbidden, name, version, by.Subject)
			}
			v.State, v.ReviewedBy, v.ReviewedAt, v.ReviewNote = to, by.Subject, s.now(), note
			return nil
		}
	}, nil
}

// Submit sends a version its reviewer sent back to review again; its
// owner's. note (what changed) is kept in the change log.
func (s *Service) Submit(ctx context.Context, name, version, note string, by *toolplane.Credential) (*toolplane.ToolVersion, error) {
	if err := toolplane.CheckLen("note", note, toolplane.MaxReasonLen); err != nil {
		return nil, fmt.Errorf("%w: %w", toolplane.ErrInvalid, err)
	}
	return s.transition(ctx, name, version, "version.submit", note, by, func(v *toolplane.ToolVersion) error {
		if !by.HasRole(toolplane.RoleToolOwner, v.Owner) {
			return fmt.Errorf("%w: a version is submitted by a tool_owner of %s", toolplane.ErrForbidden, v.Owner)
		}
		if v.State != toolplane.StatePendingApproval {
			return fmt.Errorf("%w: %s %s is %s; only a pending version is submitted", ErrTransition, name, version, v.State)
		}
		v.State = toolplane.StateInReview
		return nil
	})
}

// Deprecate marks an active version deprecated: still called, with a
// warning on every result, until its sunset. The owner's. replacement is
// what callers should move to ("" for nothing): another version of the
// same tool ("2.0.0", "^2.0.0"), or another tool, at any version
// ("billing.get_invoice") or at a version or range
// ("billing.get_invoice@^1.2.0"). It must name something the organization
// has: a version it published that is not retired, or a platform tool it
// is served; it is stored as a reference "name@range" (or "name"). note
// is the owner's word on it, kept with the version and in the change log.
func (s *Service) Deprecate(ctx context.Context, name, version string, sunset time.Time, replacement, note string, by *toolplane.Credential) (*toolplane.ToolVersion, error) {
	if err := MayChange(by); err != nil {
		return nil, err
	}
	if err := errors.Join(toolplane.CheckLen("replacement", replacement, toolplane.MaxPatternLen),
		toolplane.CheckLen("note", note, toolplane.MaxReasonLen)); err != nil {
		return nil, fmt.Errorf("%w: %w", toolplane.ErrInvalid, err)
	}
	if sunset.IsZero() {
		return nil, fmt.Errorf("%w: a deprecation names its sunset (sunset_at)", toolplane.ErrInvalid)
	}
	ref := ""
	if replacement != "" {
		var err error
		if ref, err = s.replacement(ctx, orgOf(by), name, version, replacement); err != nil {
			return nil, err
		}
	}
	return s.transition(ctx, name, version, "version.deprecate", note, by, func(v *toolplane.ToolVersion) error {
		if !by.HasRole(toolplane.RoleToolOwner, v.Owner) {
			return fmt.Errorf("%w: a version is deprecated by a tool_owner of %s", toolplane.ErrForbidden, v.Owner)
		}
		if v.State != toolplane.StateActive {
			return fmt.Errorf("%w: %s %s is %s; only an active version is deprecated", ErrTransition, name, version, v.State)
		}
		v.State, v.SunsetAt, v.Replacement, v.DeprecationNote = toolplane.StateDeprecated, sunset, ref, note
		return nil
	})
}

// replacement reads what a deprecation of name's version names as its
// replacement and answers it as a reference, "name@range" or "name". A
// version or range alone names the same tool; anything else is a tool
// name, with an optional "@range". The reference must reach something the
// organization has other than the version deprecated: a version it
// published and has not retired, or a platform tool it is served. Only a
// replacement that reaches nothing is the caller's mistake, refused
// naming what was not found; a store that does not answer is the
// platform's, and its text is not the caller's to read.
func (s *Service) replacement(ctx context.Context, org, name, version, text string) (string, error) {
	tool, rngText := semver.SplitRef(text)
	if !strings.Contains(text, "@") {
		if _, err := semver.ParseRange(text); err == nil {
			tool, rngText = name, text
		}
	}
	rng, err := semver.ParseRange(rngText)
	if err != nil {
		return "", fmt.Errorf("%w: replacement %s: %v", toolplane.ErrInvalid, text, err)
	}
	ref := tool
	if rngText != "" && rngText != "*" {
		ref = tool + "@" + rng.String()
	}
	if tool == "" {
		return "", fmt.Errorf("%w: replacement %s names no tool; write name, name@range or a version of %s", toolplane.ErrInvalid, text, name)
	}
	rows, err := s.versions(ctx, org, tool)
	if err != nil {
		return "", fmt.Errorf("deprecate %s %s: replacement %s: %w", name, version, ref, err)
	}
	var have []string
	for _, row := range rows {
		if !row.State.Callable() || (tool == name && row.Version == version) {
			continue
		}
		if rng.Contains(row.ver) {
			return ref, nil
		}
		have = append(have, row.Version)
	}
	if s.reg.GroupOf(org, tool) != Group {
		if _, ok := s.reg.Resolve(org, tool, rngText); ok {
			return ref, nil
		}
		for _, t := range s.reg.Versions(org, tool) {
			have = append(have, t.Def.Version)
		}
	}
	switch {
	case len(have) == 0 && tool == name:
		return "", fmt.Errorf("%w: replacement %s not found: %s has no other version that is not retired", toolplane.ErrInvalid, ref, name)
	case len(have) == 0:
		return "", fmt.Errorf("%w: replacement %s not found: no tool named %s is published (and not retired) in this organization or served to it", toolplane.ErrInvalid, ref, tool)
	}
	if len(have) > 10 {
		have = append(have[:10], "...")
	}
	return "", fmt.Errorf("%w: replacement %s not found: no version of %s within %s (it has %s)", toolplane.ErrInvalid, ref, tool, rng, strings.Join(have, ", "))
}

// Retire retires a deprecated version now, whoever still calls it: the
// owner's or a platform_admin's, and never undone. note (why) is kept in
// the change log.
func (s *Service) Retire(ctx context.Context, name, version, note string, by *toolplane.Credential) (*toolplane.ToolVersion, error) {
	if err := toolplane.CheckLen("note", note, toolplane.MaxReasonLen); err != nil {
		return nil, fmt.Errorf("%w: %w", toolplane.ErrInvalid, err)
	}
	return s.transition(ctx, name, version, "version.retire", note, by, func(v *toolplane.ToolVersion) error {
		if !by.HasRole(toolplane.RoleToolOwner, v.Owner) {
			return fmt.Errorf("%w: a version is retired by a tool_owner of %s or a platform_admin", toolplane.ErrForbidden, v.Owner)
		}
		if v.State != toolplane.StateDeprecated {
			return fmt.Errorf("%w: %s %s is %s; only a deprecated version is retired", ErrTransition, name, version, v.State)
		}
		v.State, v.RetireBlocked = toolplane.StateRetired, ""
		return nil
	})
}

// SunsetWindow is how far back the sunset rule looks for calls.
const SunsetWindow = 7 * 24 * time.Hour

// Sunset applies the sunset rule to every deprecated version past its
// sunset: one nobody called in the trailing window is retired; one still
// called stays, blocked, with the agents calling it named (for the owner
// to tell them). It answers the versions retired and blocked.
func (s *Service) Sunset(ctx context.Context) (retired, blocked []string, err error) {
	now := s.now()
	due, err := s.listEvery(ctx, toolplane.VersionFilter{States: []toolplane.VersionState{toolplane.StateDeprecated}})
	if err != nil {
		return nil, nil, fmt.Errorf("deprecated versions: %w", err)
	}
	for i := range due {
		v := &due[i]
		// The rule acts in the version's own organization, and records
		// its changes there.
		system := &toolplane.Credential{Kind: toolplane.CredentialPerson, OrganizationID: v.OrganizationID, Subject: "sunset",
			Roles: []string{toolplane.RolePlatformAdmin}}
		if v.SunsetAt.IsZero() || now.Before(v.SunsetAt) {
			continue
		}
		agents, err := s.callers(ctx, v, now.Add(-SunsetWindow))
		if err != nil {
			return retired, blocked, err
		}
		ref := v.OrganizationID + "/" + v.Name + " " + v.Version
		if len(agents) == 0 {
			// A version changed meanwhile is left for the next sweep; one
			// whose state no longer allows retiring it is reported.
			if _, err := s.Retire(ctx, v.Name, v.Version, "past its sunset and not called in the window", system); err != nil && (!errors.Is(err, toolplane.ErrConflict) || errors.Is(err, ErrTransition)) {
				return retired, blocked, err
			}
			retired = append(retired, ref)
			continue
		}
		why := fmt.Sprintf("called in the last %d days by %s", int(SunsetWindow/(24*time.Hour)), strings.Join(agents, ", "))
		if v.RetireBlocked != why {
			if _, err := s.transition(ctx, v.Name, v.Version, "version.retire_blocked", "", system, func(w *toolplane.ToolVersion) error {
				if w.State != toolplane.StateDeprecated {
					return fmt.Errorf("%w: %s", ErrTransition, w.State)
				}
				w.RetireBlocked = why
				return nil
			}); err != nil && !errors.Is(err, ErrTransition) && !errors.Is(err, toolplane.ErrConflict) {
				return retired, blocked, err
			}
			s.log.Warn("sunset blocked: the version is still called", "organization", v.OrganizationID, "tool", v.Name, "version", v.Version, "agents", agents)
		}
		blocked = append(blocked, ref)
	}
	return retired, blocked, nil
}

// callers answers the agents that called a version since a moment, from
// the audit trail of its organization: the only one it is served to.
func (s *Service) callers(ctx context.Context, v *toolplane.ToolVersion, since time.Time) ([]string, error) {
	seen := map[string]bool{}
	after := ""
	for {
		evs, next, err := s.store.ListAudit(ctx, v.OrganizationID, toolplane.AuditFilter{Tool: v.Name}, after, 500)
		if err != nil {
			return nil, fmt.Errorf("calls of %s %s: %w", v.Name, v.Version, err)
		}
		done := next == ""
		for _, e := range evs {
			if e.CreatedAt.Before(since) {
				done = true
				break
			}
			if e.ToolVersion == v.Version && e.Source != toolplane.SourceResume {
				seen[e.AgentID] = true
			}
		}
		if done {
			break
		}
		after = next
	}
	out := make([]string, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out, nil
}

// transition reads a version of the caller's organization, lets change
// edit it, and writes it back conditionally on its revision, recording
// the change with the note given with it. Another organization's version
// is not found. The registry is refreshed when what agents are shown
// changed.
func (s *Service) transition(ctx context.Context, name, version, kind, note string, by *toolplane.Credential, change func(*toolplane.ToolVersion) error) (*toolplane.ToolVersion, error) {
	v, shown, err := s.apply(ctx, name, version, kind, note, by, change)
	if err != nil || !shown {
		return v, err
	}
	return v, s.Refresh(ctx)
}

// apply is transition without the refresh: shown reports whether the
// change moved the version into or out of what agents are shown, so the
// registry needs a refresh.
func (s *Service) apply(ctx context.Context, name, version, kind, note string, by *toolplane.Credential, change func(*toolplane.ToolVersion) error) (v *toolplane.ToolVersion, shown bool, err error) {
	if err := MayChange(by); err != nil {
		return nil, false, err
	}
	v, err = s.store.GetToolVersion(ctx, orgOf(by), name, version)
	if errors.Is(err, toolplane.ErrNotFound) {
		return nil, false, fmt.Errorf("%s %s: %w", name, version, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s %s: %w", name, version, err)
	}
	from := v.State
	if err := change(v); err != nil {
		return nil, false, err
	}
	v.UpdatedAt = s.now()
	ok, err := s.store.UpdateToolVersion(ctx, v)
	if err != nil {
		return nil, false, fmt.Errorf("update %s %s: %w", name, version, err)
	}
	if !ok {
		return nil, false, fmt.Errorf("%w: %s %s changed meanwhile; read it again", toolplane.ErrConflict, name, version)
	}
	s.record(ctx, by, kind, v, map[string]any{"from": from, "to": v.State, "note": note, "sunset_at": v.SunsetAt, "replacement": v.Replacement, "retire_blocked": v.RetireBlocked})
	// Nothing agents are shown changed by a submission or a rejection.
	return v, from.Callable() || v.State.Callable(), nil
}

// record appends a change to the log; a failure is logged, not returned:
// the change itself is made and stored.
func (s *Service) record(ctx context.Context, by *toolplane.Credential, kind string, v *toolplane.ToolVersion, detail map[string]any) {
	body, _ := json.Marshal(detail)
	c := &toolplane.Change{ID: toolplane.NewID("chg_"), OrganizationID: v.OrganizationID, Kind: kind, Subject: v.Name + "@" + v.Version,
		Actor: by.Subject, Detail: body, CreatedAt: s.now()}
	if err := s.store.AppendChange(ctx, c); err != nil {
		s.log.ErrorContext(ctx, "change not recorded", "kind", kind, "subject", c.Subject, "err", err)
	}
}

// Refresh loads every callable version into the registry, each served to
// its own organization, when the catalogue changed since the last load. Each node calls it periodically
// (Watch) and after its own changes.
func (s *Service) Refresh(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rev, err := s.store.CatalogRevision(ctx)
	if err != nil {
		return fmt.Errorf("catalogue revision: %w", err)
	}
	if s.loaded && rev == s.revision {
		return nil
	}
	rows, err := s.listEvery(ctx, toolplane.VersionFilter{States: []toolplane.VersionState{toolplane.StateActive, toolplane.StateDeprecated}})
	if err != nil {
		return fmt.Errorf("load the catalogue: %w", err)
	}
	vs := make([]registry.Version, 0, len(rows))
	for _, tv := range rows {
		var d toolplane.Definition
		if err := json.Unmarshal(tv.Definition, &d); err != nil {
			s.log.ErrorContext(ctx, "stored definition unreadable", "tool", tv.Name, "version", tv.Version, "err", err)
			continue
		}
		vs = append(vs, registry.Version{Organization: tv.OrganizationID, Def: d, State: tv.State, SunsetAt: tv.SunsetAt, Replacement: tv.Replacement})
	}
	for _, p := range s.reg.SetVersions(Group, vs) {
		s.log.WarnContext(ctx, "published version not served", "problem", p.String())
	}
	s.revision, s.loaded = rev, true
	return nil
}

// Watch refreshes the registry every interval until ctx ends, so a
// version published or retired on another node reaches this one.
func (s *Service) Watch(ctx context.Context, every time.Duration) { s.Follow(ctx, nil, every) }

// Follow refreshes the registry as soon as feed (when not nil) tells of a
// change to the catalogue, on any node, and every interval besides, until
// ctx ends: a version published or retired on another node is served here
// within the feed's latency, and the poll still catches what a feed that
// lost its connection did not tell. Changes told while a refresh runs
// make one more.
func (s *Service) Follow(ctx context.Context, feed toolplane.ChangeFeed, every time.Duration) {
	toolplane.FollowChanges(ctx, feed, toolplane.TopicCatalog, every, s.Refresh, s.log, "catalogue")
}

// versions answers every version of a name in the organization, oldest
// first by precedence.
func (s *Service) versions(ctx context.Context, org, name string) ([]versionedRow, error) {
	rows, err := collect(func(after string) ([]toolplane.ToolVersion, string, error) {
		return s.store.ListToolVersions(ctx, org, toolplane.VersionFilter{Name: name}, after, 500)
	})
	if err != nil {
		return nil, fmt.Errorf("versions of %s: %w", name, err)
	}
	out := make([]versionedRow, 0, len(rows))
	for _, row := range rows {
		ver, err := semver.Parse(row.Version)
		if err != nil {
			continue
		}
		out = append(out, versionedRow{ToolVersion: row, ver: ver})
	}
	sort.Slice(out, func(i, j int) bool { return semver.Compare(out[i].ver, out[j].ver) < 0 })
	return out, nil
}

// listEvery answers the versions of every organization the filter
// matches: the deployment's own read.
func (s *Service) listEvery(ctx context.Context, f toolplane.VersionFilter) ([]toolplane.ToolVersion, error) {
	return collect(func(after string) ([]toolplane.ToolVersion, string, error) {
		return s.store.ListEveryToolVersion(ctx, f, after, 500)
	})
}

// collect answers every row of a listing, page by page: a caller never
// stops at the first page.
func collect(list func(after string) ([]toolplane.ToolVersion, string, error)) ([]toolplane.ToolVersion, error) {
	var out []toolplane.ToolVersion
	after := ""
	for {
		page, next, err := list(after)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		after = next
	}
}

// versionedRow is a stored version with its parsed version.
type versionedRow struct {
	toolplane.ToolVersion
	ver semver.Version
}

// below answers the greatest version under v (the one a new version is
// compared with), or nil.
func below(rows []versionedRow, v semver.Version) *versionedRow {
	for i := len(rows) - 1; i >= 0; i-- {
		if semver.Compare(rows[i].ver, v) < 0 {
			return &rows[i]
		}
	}
	return nil
}
