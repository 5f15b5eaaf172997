package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
)

// Settings changes the relaxation of one upstream tool at runtime. The
// upstreams file's relaxations are the defaults; a stored setting replaces
// the file's for its tool as a whole (a field it leaves out takes the
// restrictive default, not the file's), until it is reset. Settings are the
// deployment's, like the platform tools they shape: they apply to every
// organization, every node applies them (Watch), and only the operator
// changes them, that is a platform_admin of the operator's organization
// (the one the first start's admin key belongs to). A platform_admin of
// any other organization administers that organization, not the
// deployment's tools. Every change is recorded in the change log of the
// operator's organization.
type Settings struct {
	store    toolplane.UpstreamSettingStore
	set      *Set
	operator string
	log      *slog.Logger
	now      func() time.Time

	mu      sync.Mutex
	applied []toolplane.UpstreamToolSetting
}

// NewSettings answers the settings service of set, stored in store, whose
// operator is a platform_admin of the organization operator.
func NewSettings(store toolplane.UpstreamSettingStore, set *Set, operator string, log *slog.Logger) *Settings {
	if log == nil {
		log = slog.Default()
	}
	return &Settings{store: store, set: set, operator: operator, log: log, now: time.Now}
}

// Setting is one tool's settings as the operator reads them.
type Setting struct {
	Upstream string `json:"upstream"`
	Tool     string `json:"tool"`
	// Name is the tool's platform name, mcp.<slug>.<tool>.
	Name string `json:"name"`
	// Effective is what calls are decided under now on this node.
	Effective Effective `json:"effective"`
	// File is the upstreams file's relaxation (nil: the defaults).
	File *Relax `json:"file,omitempty"`
	// Stored is the operator's runtime setting (nil: none, the file's
	// counts).
	Stored    *Relax     `json:"stored,omitempty"`
	UpdatedBy string     `json:"updated_by,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

// Effective is the part of an ingested tool's definition its settings
// decide.
type Effective struct {
	Effect           toolplane.Effect `json:"effect"`
	Destructive      bool             `json:"destructive"`
	RequiresApproval bool             `json:"requires_approval"`
	Idempotent       bool             `json:"idempotent"`
	MaxAttempts      int              `json:"max_attempts,omitempty"`
}

// mayChange refuses anyone but the deployment's operator.
func (s *Settings) mayChange(by *toolplane.Credential) error {
	if by == nil || by.OrganizationID != s.operator || !by.HasRole(toolplane.RolePlatformAdmin, "") {
		return fmt.Errorf("%w: the settings of upstream tools are the deployment's; they are read and changed by a platform_admin of the operator's organization (%s)", toolplane.ErrForbidden, s.operator)
	}
	return nil
}

// known answers the server, or ErrNotFound for a slug not configured or a
// tool its server did not list.
func (s *Settings) known(slug, tool string) (*upstream, error) {
	u, ok := s.set.ups[slug]
	if !ok {
		return nil, fmt.Errorf("upstream %q: %w", slug, toolplane.ErrNotFound)
	}
	u.mu.Lock()
	_, listed := u.remote[tool]
	u.mu.Unlock()
	if !listed {
		return nil, fmt.Errorf("tool %q of upstream %q (not listed by the server): %w", tool, slug, toolplane.ErrNotFound)
	}
	return u, nil
}

// Get answers one tool's settings.
func (s *Settings) Get(ctx context.Context, by *toolplane.Credential, slug, tool string) (*Setting, error) {
	if err := s.mayChange(by); err != nil {
		return nil, err
	}
	u, err := s.known(slug, tool)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, u, tool)
}

// Put stores r as the tool's setting, records the change and applies it on
// this node at once (the others within their Watch interval).
func (s *Settings) Put(ctx context.Context, by *toolplane.Credential, slug, tool string, r Relax) (*Setting, error) {
	if err := s.mayChange(by); err != nil {
		return nil, err
	}
	u, err := s.known(slug, tool)
	if err != nil {
		return nil, err
	}
	if problems := checkRelax(tool, r); len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrConfig, strings.Join(problems, "; "))
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("put setting of %s/%s: %w", slug, tool, err)
	}
	now := s.now()
	change, err := s.change(by, "upstream.tool_settings.put", slug, tool, raw, now)
	if err != nil {
		return nil, err
	}
	if err := s.store.PutUpstreamToolSettingRecorded(ctx, &toolplane.UpstreamToolSetting{Upstream: slug, Tool: tool, Settings: raw, UpdatedBy: by.Subject, UpdatedAt: now}, change); err != nil {
		return nil, err
	}
	return s.refreshed(ctx, u, tool)
}

// Reset removes the tool's stored setting: the file's counts again.
// ErrNotFound when there is none.
func (s *Settings) Reset(ctx context.Context, by *toolplane.Credential, slug, tool string) (*Setting, error) {
	if err := s.mayChange(by); err != nil {
		return nil, err
	}
	u, err := s.known(slug, tool)
	if err != nil {
		return nil, err
	}
	change, err := s.change(by, "upstream.tool_settings.reset", slug, tool, nil, s.now())
	if err != nil {
		return nil, err
	}
	if err := s.store.DeleteUpstreamToolSettingRecorded(ctx, slug, tool, change); err != nil {
		return nil, err
	}
	return s.refreshed(ctx, u, tool)
}

// change answers the change-log record of a setting's change, in the
// operator's organization.
func (s *Settings) change(by *toolplane.Credential, kind, slug, tool string, settings json.RawMessage, at time.Time) (*toolplane.Change, error) {
	detail, err := json.Marshal(map[string]any{"upstream": slug, "tool": tool, "settings": settings})
	if err != nil {
		return nil, fmt.Errorf("record the change of %s/%s: %w", slug, tool, err)
	}
	return &toolplane.Change{ID: toolplane.NewID("chg_"), OrganizationID: s.operator, Kind: kind,
		Subject: "mcp." + slug + "." + tool, Actor: by.Subject, Detail: detail, CreatedAt: at}, nil
}

// refreshed applies the stored settings on this node and answers the
// tool's settings from the same read.
func (s *Settings) refreshed(ctx context.Context, u *upstream, tool string) (*Setting, error) {
	all, err := s.refresh(ctx)
	if err != nil {
		return nil, err
	}
	return s.viewOf(u, tool, all)
}

// view answers the tool's settings as this node holds them.
func (s *Settings) view(ctx context.Context, u *upstream, tool string) (*Setting, error) {
	all, err := s.store.ListUpstreamToolSettings(ctx)
	if err != nil {
		return nil, err
	}
	return s.viewOf(u, tool, all)
}

// viewOf answers the tool's settings, all being the stored settings.
func (s *Settings) viewOf(u *upstream, tool string, all []toolplane.UpstreamToolSetting) (*Setting, error) {
	out := &Setting{Upstream: u.cfg.Slug, Tool: tool, Name: "mcp." + u.cfg.Slug + "." + tool}
	if r, ok := u.cfg.Tools[tool]; ok {
		out.File = &r
	}
	for _, st := range all {
		if st.Upstream == u.cfg.Slug && st.Tool == tool {
			r, err := decodeSetting(st.Settings)
			if err != nil {
				return nil, err
			}
			out.Stored, out.UpdatedBy = &r, st.UpdatedBy
			at := st.UpdatedAt
			out.UpdatedAt = &at
		}
	}
	if t, ok := s.set.reg.Get("", out.Name); ok {
		d := &t.Def
		out.Effective = Effective{Effect: d.Effect, Destructive: d.Annotations.Destructive, RequiresApproval: d.Annotations.RequiresApproval,
			Idempotent: d.Annotations.Idempotent}
		if d.Replay != nil {
			out.Effective.MaxAttempts = d.Replay.MaxAttempts
		}
	}
	return out, nil
}

func decodeSetting(raw []byte) (Relax, error) {
	var r Relax
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("stored upstream setting: %w", err)
	}
	return r, nil
}

// Refresh reads the stored settings and applies them on this node when
// they changed since it last did.
func (s *Settings) Refresh(ctx context.Context) error {
	_, err := s.refresh(ctx)
	return err
}

// refresh is Refresh, answering the settings it read.
func (s *Settings) refresh(ctx context.Context) ([]toolplane.UpstreamToolSetting, error) {
	all, err := s.store.ListUpstreamToolSettings(ctx)
	if err != nil {
		return nil, fmt.Errorf("read upstream settings: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.EqualFunc(all, s.applied, sameSetting) {
		return all, nil
	}
	by := map[string]map[string]Relax{}
	for _, st := range all {
		r, err := decodeSetting(st.Settings)
		if err != nil {
			// Written by a newer node, perhaps: the tool keeps the
			// restrictive defaults rather than the file's relaxation.
			s.log.ErrorContext(ctx, "upstream setting unreadable; the tool takes the restrictive defaults", "upstream", st.Upstream, "tool", st.Tool, "err", err)
			r = Relax{}
		}
		if by[st.Upstream] == nil {
			by[st.Upstream] = map[string]Relax{}
		}
		by[st.Upstream][st.Tool] = r
	}
	s.set.override(by)
	s.applied = all
	return all, nil
}

func sameSetting(a, b toolplane.UpstreamToolSetting) bool {
	return a.Upstream == b.Upstream && a.Tool == b.Tool && bytes.Equal(a.Settings, b.Settings)
}

// Watch refreshes every interval until ctx ends, so a change made on
// another node takes effect here within one interval.
func (s *Settings) Watch(ctx context.Context, every time.Duration) { s.Follow(ctx, nil, every) }

// Follow refreshes as soon as feed (when not nil) tells of a change to
// the stored settings, on any node, and every interval besides, until ctx
// ends: a change made on another node takes effect here within the feed's
// latency, and the poll still catches what a feed that lost its
// connection did not tell. Changes told while a refresh runs make one
// more.
func (s *Settings) Follow(ctx context.Context, feed toolplane.ChangeFeed, every time.Duration) {
	toolplane.FollowChanges(ctx, feed, toolplane.TopicUpstreamSettings, every, s.Refresh, s.log, "upstream settings")
}

// Server is one upstream MCP server as the operator reads it: where it is
// reached (a URL without its credentials, or the program it runs), whether
// this node holds a session to it now, and how many tools it listed.
type Server struct {
	Slug string `json:"slug"`
	// Transport is "http" (Streamable HTTP) or "stdio".
	Transport string `json:"transport"`
	// Endpoint is the URL with its secrets redacted (as error text shows
	// it), or the command's program for stdio.
	Endpoint string `json:"endpoint"`
	// Path is where toolplane serves the governed copy of the server.
	Path      string `json:"path"`
	Connected bool   `json:"connected"`
	Tools     int    `json:"tools"`
	// Connection names the connection provider that authorizes its calls.
	Connection string `json:"connection,omitempty"`
	Owner      string `json:"owner,omitempty"`
}

// List answers the configured servers, by slug, to the operator (as the
// settings are: the servers are the deployment's).
func (s *Settings) List(by *toolplane.Credential) ([]Server, error) {
	if err := s.mayChange(by); err != nil {
		return nil, err
	}
	out := make([]Server, 0, len(s.set.ups))
	for slug, u := range s.set.ups {
		v := Server{Slug: slug, Path: "/mcp/" + slug, Connection: u.cfg.Connection, Owner: u.cfg.Owner}
		if u.cfg.URL != "" {
			v.Transport, v.Endpoint = "http", boundary.RedactURL(u.cfg.URL)
		} else if len(u.cfg.Command) > 0 {
			v.Transport, v.Endpoint = "stdio", filepath.Base(u.cfg.Command[0])
		}
		u.mu.Lock()
		v.Connected, v.Tools = u.session != nil, len(u.remote)
		u.mu.Unlock()
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.Slug, b.Slug) })
	return out, nil
}

// Status is one upstream server as the operator watches it: the server,
// the health of this node's connection to it, and the tools it last
// listed, each with its contract and whether that contract drifted.
type Status struct {
	Server
	// ConnectedAt is when this node's session to it last came up.
	ConnectedAt time.Time
	// FailingSince, FailedAt and LastError say that connecting to it or
	// listing its tools has failed since it last answered: from when,
	// the latest failure and its text (the URL's secrets masked). All
	// zero when it answered last.
	FailingSince, FailedAt time.Time
	LastError              string
	// Tools are the tools it last listed, by name.
	Tools []ToolStatus
}

// Drifted answers how many of its tools drifted.
func (s *Status) Drifted() int {
	n := 0
	for _, t := range s.Tools {
		if t.Drifted {
			n++
		}
	}
	return n
}

// ToolStatus is one listed tool of an upstream server.
type ToolStatus struct {
	// Tool is the server's own name, Name the platform's.
	Tool, Name string
	// Version and SchemaHash are the contract this node serves: the
	// version's major grows each time a listing changes the contract.
	Version, SchemaHash string
	// Ingested says the registry serves it; a tool ingestion refused (a
	// colliding name, a schema that does not compile) is listed but not
	// served.
	Ingested bool
	// Drifted says its contract is no longer the one this node first
	// ingested (FirstHash), since ChangedAt: a run shown the old one is
	// answered tool_changed.
	Drifted   bool
	FirstHash string
	ChangedAt time.Time
	// Effective is what its calls are decided under; Stored says an
	// operator's runtime setting replaces the upstreams file's.
	Effective Effective
	Stored    bool
}

// Statuses answers every configured server's status, by slug, to the
// operator, as List does.
func (s *Settings) Statuses(ctx context.Context, by *toolplane.Credential) ([]Status, error) {
	servers, err := s.List(by)
	if err != nil {
		return nil, err
	}
	stored, err := s.store.ListUpstreamToolSettings(ctx)
	if err != nil {
		return nil, fmt.Errorf("read upstream settings: %w", err)
	}
	out := make([]Status, len(servers))
	for i, v := range servers {
		out[i] = s.status(v, stored)
	}
	return out, nil
}

// Status answers one server's status to the operator, or ErrNotFound for
// a slug not configured.
func (s *Settings) Status(ctx context.Context, by *toolplane.Credential, slug string) (*Status, error) {
	all, err := s.Statuses(ctx, by)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].Slug == slug {
			return &all[i], nil
		}
	}
	return nil, fmt.Errorf("upstream %q: %w", slug, toolplane.ErrNotFound)
}

// status answers the status of server v, stored being the operator's
// runtime settings.
func (s *Settings) status(v Server, stored []toolplane.UpstreamToolSetting) Status {
	u := s.set.ups[v.Slug]
	st := Status{Server: v}
	u.mu.Lock()
	h := u.health
	st.ConnectedAt, st.FailingSince, st.FailedAt, st.LastError = h.connectedAt, h.failingSince, h.failedAt, h.lastErr
	for name := range u.remote {
		t := ToolStatus{Tool: name, Name: "mcp." + v.Slug + "." + name}
		if c, ok := u.contracts[name]; ok {
			t.Version, t.SchemaHash = fmt.Sprintf("%d.0.0", c.major), c.hash
			t.Drifted, t.FirstHash, t.ChangedAt = c.hash != c.first, c.first, c.changedAt
		}
		st.Tools = append(st.Tools, t)
	}
	u.mu.Unlock()
	slices.SortFunc(st.Tools, func(a, b ToolStatus) int { return strings.Compare(a.Tool, b.Tool) })
	for i := range st.Tools {
		t := &st.Tools[i]
		if reg, ok := s.set.reg.Get("", t.Name); ok && s.set.reg.GroupOf("", t.Name) == v.Slug {
			d := &reg.Def
			t.Ingested = true
			t.Effective = Effective{Effect: d.Effect, Destructive: d.Annotations.Destructive, RequiresApproval: d.Annotations.RequiresApproval,
				Idempotent: d.Annotations.Idempotent}
			if d.Replay != nil {
				t.Effective.MaxAttempts = d.Replay.MaxAttempts
			}
		}
		for _, set := range stored {
			if set.Upstream == v.Slug && set.Tool == t.Tool {
				t.Stored = true
			}
		}
	}
	return st
}

// MayRead answers nil when by may read the upstream servers and their
// settings (the deployment's operator), the refusal List would answer
// otherwise: what a navigation asks before it offers their page.
func (s *Settings) MayRead(by *toolplane.Credential) error { return s.mayChange(by) }
