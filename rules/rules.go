// Package rules keeps each organization's policy bundles and decides
// every call with them. A bundle is a set of files in one rule language
// (Cedar or Rego, each an engine implementing policy.Engine): it is tested
// before it is published, published as a new version (1, 2, 3...), rolled
// back by publishing an older version's files again, and shadowed against
// the calls of the last days before it takes effect.
//
// Deciding is two stages (see Service.Decide): stage 1 is the grants
// (authz.Policy), stage 2 the organization's latest bundle. With no bundle
// published, or the break-glass version in force, stage 1 alone decides.
//
// Publishing, rolling back and disabling are a platform_admin's: the
// rules bound what agent operators grant, so the operators whose grants
// they bind do not rewrite them. Reading, testing and shadowing need the
// agent_operator, auditor or platform_admin role. A refusal is a
// toolplane.ErrForbidden; a bundle that cannot be published as written a
// toolplane.ErrInvalid (a *policy.BundleError for one that does not
// compile, a *TestsFailedError for one whose tests fail).
package rules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/policy"
)

// Bounds of a bundle: enough for hundreds of rules and their tests, and
// small enough that every node compiles it at once and the store keeps it
// in one row.
const (
	MaxFiles       = 64
	MaxFileBytes   = 256 << 10
	MaxBundleBytes = 1 << 20
	MaxNoteBytes   = 1024
)

// Store is what the service keeps bundles in and replays shadows from.
//
// A version is stored with its change record and its audit event (kind
// policy) in one transaction (InsertPolicyBundleAudited).
type Store interface {
	toolplane.PolicyBundleStore
	ListAudit(ctx context.Context, org string, filter toolplane.AuditFilter, after string, limit int) ([]toolplane.AuditEvent, string, error)
}

// Config is what a Service is built from. Store and Grants are required.
type Config struct {
	Store Store
	// Grants is stage 1 of every decision.
	Grants authz.Policy
	// Engines are the rule languages bundles may be written in.
	Engines []policy.Engine
	// RunCost answers the cost so far of a run tree, for the rules'
	// context; nil leaves it 0.
	RunCost func(ctx context.Context, org, rootRunID string) (int64, error)
	// Budget bounds one evaluation of the rules; zero is DefaultBudget.
	Budget time.Duration
	// RunBudget bounds the time a shadow run spends; zero is
	// DefaultRunBudget.
	RunBudget time.Duration
	// TestBudget bounds the time a run of a bundle's tests spends (the
	// test endpoint's and a publish's); zero is DefaultTestBudget.
	TestBudget time.Duration
	// Zone is the deployment's time zone: what an organization's rules
	// read time in when its bundle names none, and its zone while it has
	// no bundle; nil is UTC.
	Zone *time.Location
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// DefaultBudget is how long one evaluation of an organization's rules may
// take before it is a fault.
const DefaultBudget = 100 * time.Millisecond

// DefaultRunBudget is how long one shadow run may spend: each decision is
// bounded by the evaluation budget, but a candidate that spends it on
// every one of MaxShadowEvents past calls would hold a core for hours.
const DefaultRunBudget = 30 * time.Second

// DefaultTestBudget is how long one run of a bundle's tests may spend. A
// table's case decides in microseconds, and an `opa test` test of a large
// Rego bundle in tens of milliseconds (300 tests of a 3,000-rule bundle
// took 7 s on a loaded two-core host); the endpoint that runs them needs
// only the role that reads bundles, and a bundle written to spend every
// test's budget must not hold a core for longer than this.
const DefaultTestBudget = 10 * time.Second

// Service keeps bundles and decides calls with them.
type Service struct {
	store   Store
	grants  authz.Policy
	engines map[string]policy.Engine
	runCost func(ctx context.Context, org, rootRunID string) (int64, error)
	budget  time.Duration
	// runBudget bounds a shadow run (see DefaultRunBudget), testBudget a
	// run of a bundle's tests (see DefaultTestBudget).
	runBudget  time.Duration
	testBudget time.Duration
	now        func() time.Time
	// zone is the deployment's time zone (Config.Zone).
	zone *time.Location

	mu    sync.Mutex
	cache map[string]*compiled
}

// New answers a service built from cfg.
func New(cfg Config) *Service {
	s := &Service{store: cfg.Store, grants: cfg.Grants, runCost: cfg.RunCost, budget: cfg.Budget, runBudget: cfg.RunBudget,
		testBudget: cfg.TestBudget, now: cfg.Now, zone: cfg.Zone, engines: map[string]policy.Engine{}, cache: map[string]*compiled{}}
	if s.zone == nil {
		s.zone = time.UTC
	}
	if s.budget <= 0 {
		s.budget = DefaultBudget
	}
	if s.runBudget <= 0 {
		s.runBudget = DefaultRunBudget
	}
	if s.testBudget <= 0 {
		s.testBudget = DefaultTestBudget
	}
	if s.now == nil {
		s.now = time.Now
	}
	for _, e := range cfg.Engines {
		s.engines[e.Language()] = e
	}
	return s
}

// MayPublish refuses a caller who may not publish, roll back or disable
// an organization's rules: a platform_admin's.
func MayPublish(by *toolplane.Credential) error {
	if !by.HasRole(toolplane.RolePlatformAdmin, "") {
		return toolplane.Refuse(by, nil, "publishing policy bundles is a platform_admin's")
	}
	return nil
}

// MayRead refuses a caller who may not read, test or shadow bundles: an
// agent_operator's, an auditor's or a platform_admin's.
func MayRead(by *toolplane.Credential) error {
	if by == nil || !by.HasAnyRole(toolplane.RoleAgentOperator, toolplane.RoleAuditor) {
		return toolplane.Refuse(by, nil, "reading policy bundles needs the agent_operator, auditor or platform_admin role")
	}
	return nil
}

// MayShadow refuses a caller who may not shadow a candidate: an
// auditor's or a platform_admin's. A shadow run reads the organization's
// audit trail, which is the auditor's, and a candidate's decisions and
// reasons can carry what the recorded calls held.
func MayShadow(by *toolplane.Credential) error {
	if by == nil || !by.HasAnyRole(toolplane.RoleAuditor) {
		return toolplane.Refuse(by, nil, "a shadow run reads the audit trail, and needs the auditor or platform_admin role")
	}
	return nil
}

// TestsFailedError is a bundle whose own tests fail: it is not published.
type TestsFailedError struct {
	Failed []policy.TestResult
}

func (e *TestsFailedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of the bundle's tests fail:", len(e.Failed))
	for _, f := range e.Failed {
		b.WriteString("\n  " + f.Name)
		if f.Message != "" {
			b.WriteString(": " + f.Message)
		}
	}
	return b.String()
}

// Is makes a TestsFailedError a toolplane.ErrInvalid.
func (e *TestsFailedError) Is(target error) bool { return target == toolplane.ErrInvalid }

// Language answers the rule language of files, named by the extension of
// its rule files: ".cedar", ".rego", or the language of one of engines.
// Other files (tests, notes) take no side. A bundle with no rule file, or
// rule files of two languages, is a toolplane.ErrInvalid, as is one past
// the bounds or holding a file that is not UTF-8 text.
func Language(engines []policy.Engine, files map[string]string) (string, error) {
	if len(files) == 0 {
		return "", fmt.Errorf("%w: the bundle has no files", toolplane.ErrInvalid)
	}
	if len(files) > MaxFiles {
		return "", fmt.Errorf("%w: the bundle has %d files; at most %d", toolplane.ErrInvalid, len(files), MaxFiles)
	}
	known := map[string]bool{".cedar": true, ".rego": true}
	for _, e := range engines {
		known["."+e.Language()] = true
	}
	total := 0
	langs := map[string][]string{}
	for name, content := range files {
		if len(name) > 255 || !fs.ValidPath(name) || name == "." || !utf8.ValidString(name) || strings.ContainsAny(name, "\\\x00") {
			return "", fmt.Errorf("%w: file name %q: a relative slash-separated path inside the bundle", toolplane.ErrInvalid, name)
		}
		if len(content) > MaxFileBytes {
			return "", fmt.Errorf("%w: %s is %d bytes; at most %d", toolplane.ErrInvalid, name, len(content), MaxFileBytes)
		}
		if !utf8.ValidString(content) || strings.IndexByte(content, 0) >= 0 {
			return "", fmt.Errorf("%w: %s is not UTF-8 text", toolplane.ErrInvalid, name)
		}
		total += len(content)
		if ext := path.Ext(name); known[ext] {
			langs[ext[1:]] = append(langs[ext[1:]], name)
		}
	}
	if total > MaxBundleBytes {
		return "", fmt.Errorf("%w: the bundle is %d bytes; at most %d", toolplane.ErrInvalid, total, MaxBundleBytes)
	}
	var names []string
	for l, files := range langs {
		names = append(names, fmt.Sprintf("%s (%s)", l, strings.Join(sorted(files), ", ")))
	}
	switch len(langs) {
	case 0:
		return "", fmt.Errorf("%w: the bundle has no rule file (.cedar or .rego)", toolplane.ErrInvalid)
	case 1:
		for l := range langs {
			return l, nil
		}
	}
	return "", fmt.Errorf("%w: the bundle mixes languages: %s; publish one language", toolplane.ErrInvalid, strings.Join(sorted(names), "; "))
}

func sorted(s []string) []string { slices.Sort(s); return s }

// Compile answers files compiled by the engine of their language.
func Compile(engines []policy.Engine, files map[string]string) (policy.Rules, string, error) {
	lang, err := Language(engines, files)
	if err != nil {
		return nil, "", err
	}
	for _, e := range engines {
		if e.Language() != lang {
			continue
		}
		r, err := e.Compile(files)
		if err != nil {
			if be, ok := errors.AsType[*policy.BundleError](err); ok {
				return nil, "", fmt.Errorf("%w: %w", toolplane.ErrInvalid, be)
			}
			return nil, "", fmt.Errorf("%w: compile %s bundle: %w", toolplane.ErrInvalid, lang, err)
		}
		return r, lang, nil
	}
	return nil, "", fmt.Errorf("%w: this deployment has no %s engine", toolplane.ErrInvalid, lang)
}

// Test compiles files and runs the bundle's own tests, offline: what
// `toolplane policy test DIR` runs without a server. A bundle that does
// not compile is an error; failing tests are results, not an error.
func Test(ctx context.Context, engines []policy.Engine, files map[string]string) ([]policy.TestResult, error) {
	r, _, err := Compile(engines, files)
	if err != nil {
		return nil, err
	}
	res, err := r.Test(ctx)
	if err != nil {
		return nil, fmt.Errorf("run the bundle's tests: %w", err)
	}
	return res, nil
}

// failed answers the failing results.
func failed(res []policy.TestResult) []policy.TestResult {
	var out []policy.TestResult
	for _, r := range res {
		if !r.Pass {
			out = append(out, r)
		}
	}
	return out
}

// Test runs a bundle's tests for a caller who may read bundles.
func (s *Service) Test(ctx context.Context, files map[string]string, by *toolplane.Credential) ([]policy.TestResult, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	r, _, err := Compile(s.languages(), files)
	if err != nil {
		return nil, err
	}
	return s.runTests(ctx, r)
}

// runTests runs a compiled bundle's tests within the test budget: a
// bundle whose tests do not finish by then is refused as invalid, so that
// a request cannot hold a core for as long as its tests would take. (Each
// test is bounded in time and memory by its engine too.)
func (s *Service) runTests(ctx context.Context, r policy.Rules) ([]policy.TestResult, error) {
	ctx, cancel := context.WithTimeout(ctx, s.testBudget)
	defer cancel()
	res, err := r.Test(ctx)
	if ctx.Err() != nil && context.Cause(ctx) == context.DeadlineExceeded {
		return nil, fmt.Errorf("%w: the bundle's tests did not finish within %s", toolplane.ErrInvalid, s.testBudget)
	}
	if err != nil {
		return nil, fmt.Errorf("run the bundle's tests: %w", err)
	}
	return res, nil
}

func (s *Service) languages() []policy.Engine {
	out := make([]policy.Engine, 0, len(s.engines))
	for _, e := range s.engines {
		out = append(out, e)
	}
	return out
}

// PublishOptions are what a publish says beside the files.
type PublishOptions struct {
	// Note says why, in the change log and the bundle.
	Note string
	// TimeZone is the IANA zone the rules read time in; "" keeps the
	// zone of the version in force (UTC when none).
	TimeZone string
}

// Publish stores files as the organization's next version, in force on
// every node within two seconds. It refuses a caller who is not a
// platform_admin, a bundle past the bounds, of mixed or unknown language,
// that does not compile, that has no tests or whose tests fail, and an
// unknown time zone; nothing changes then.
func (s *Service) Publish(ctx context.Context, files map[string]string, opt PublishOptions, by *toolplane.Credential) (*toolplane.PolicyBundle, error) {
	return s.publish(ctx, files, opt, PublishedOutcome, by)
}

// publish is Publish, audited with outcome (a publish or a rollback).
func (s *Service) publish(ctx context.Context, files map[string]string, opt PublishOptions, outcome string, by *toolplane.Credential) (*toolplane.PolicyBundle, error) {
	if err := MayPublish(by); err != nil {
		return nil, err
	}
	r, lang, err := Compile(s.languages(), files)
	if err != nil {
		return nil, err
	}
	res, err := s.runTests(ctx, r)
	if err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("%w: the bundle has no tests; a bundle is published with tests that show what it decides", toolplane.ErrInvalid)
	}
	if f := failed(res); len(f) > 0 {
		return nil, &TestsFailedError{Failed: f}
	}
	b := &toolplane.PolicyBundle{Language: lang, Files: files, Digest: toolplane.PolicyBundleDigest(files),
		TimeZone: opt.TimeZone, Note: opt.Note}
	return s.insert(ctx, b, "policy.publish", outcome, by)
}

// Disable is the break-glass: it publishes a version with no rules, so
// the grants alone decide every call of the organization until a bundle
// is published again. A platform_admin's, and a note saying why is
// required.
func (s *Service) Disable(ctx context.Context, note string, by *toolplane.Credential) (*toolplane.PolicyBundle, error) {
	if err := MayPublish(by); err != nil {
		return nil, err
	}
	if strings.TrimSpace(note) == "" {
		return nil, fmt.Errorf("%w: disabling the rules says why (note)", toolplane.ErrInvalid)
	}
	b := &toolplane.PolicyBundle{Disabled: true, Digest: toolplane.PolicyBundleDigest(nil), Note: note}
	return s.insert(ctx, b, "policy.disable", DisabledOutcome, by)
}

// Rollback publishes the files of an earlier version again, as the next
// version: the history stays whole, and the rolled-back version is
// tested again like any publish (an engine upgrade may have changed what
// it decides).
func (s *Service) Rollback(ctx context.Context, version int64, note string, by *toolplane.Credential) (*toolplane.PolicyBundle, error) {
	if err := MayPublish(by); err != nil {
		return nil, err
	}
	old, err := s.store.GetPolicyBundle(ctx, by.OrganizationID, version)
	if err != nil {
		return nil, fmt.Errorf("roll back to version %d: %w", version, err)
	}
	if note == "" {
		note = fmt.Sprintf("rollback to version %d", version)
	}
	if old.Disabled {
		return s.Disable(ctx, note, by)
	}
	return s.publish(ctx, old.Files, PublishOptions{Note: note, TimeZone: old.TimeZone}, RolledBackOutcome, by)
}

// insert stores b as the organization's next version. Two publishes at
// once cannot both take a version: the loser reads the new latest and
// tries the next, a few times.
func (s *Service) insert(ctx context.Context, b *toolplane.PolicyBundle, kind, outcome string, by *toolplane.Credential) (*toolplane.PolicyBundle, error) {
	if len(b.Note) > MaxNoteBytes || !utf8.ValidString(b.Note) {
		return nil, fmt.Errorf("%w: note: UTF-8 text of at most %d bytes", toolplane.ErrInvalid, MaxNoteBytes)
	}
	org := by.OrganizationID
	for attempt := 0; ; attempt++ {
		latest, err := s.store.PolicyBundleVersion(ctx, org)
		if err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
		// The zone versions with the rules, and a disabled version keeps
		// it too: the org_time fact reads it through the break-glass, and
		// the next publish that names none takes it from there.
		if b.TimeZone == "" && latest > 0 {
			prev, err := s.store.GetPolicyBundle(ctx, org, latest)
			if err != nil {
				return nil, fmt.Errorf("publish: %w", err)
			}
			b.TimeZone = prev.TimeZone
		}
		if _, err := zone(b.TimeZone); err != nil {
			return nil, err
		}
		b.OrganizationID, b.Version, b.PublishedBy, b.PublishedAt = org, latest+1, by.Subject, s.now()
		// The version, its change record and its audit event are
		// stored together: a version is never in force unrecorded.
		c, ev := publishRecord(b, kind, outcome, by)
		err = s.store.InsertPolicyBundleAudited(ctx, b, c, ev)
		if errors.Is(err, toolplane.ErrExists) && attempt < 5 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("publish version %d: %w", b.Version, err)
		}
		break
	}
	s.mu.Lock()
	delete(s.cache, b.OrganizationID)
	s.mu.Unlock()
	return b, nil
}

// publishRecord answers the change record and the audit event (kind
// policy, with outcome) of by's publish of b, a change of kind. Each
// attempt at a version gets its own, with fresh IDs.
func publishRecord(b *toolplane.PolicyBundle, kind, outcome string, by *toolplane.Credential) (*toolplane.Change, *toolplane.AuditEvent) {
	detail, _ := json.Marshal(map[string]any{"version": b.Version, "language": b.Language, "digest": b.Digest,
		"time_zone": b.TimeZone, "disabled": b.Disabled, "note": b.Note})
	c := &toolplane.Change{ID: toolplane.NewID("chg_"), OrganizationID: b.OrganizationID, Kind: kind,
		Subject: fmt.Sprintf("v%d", b.Version), Actor: by.Subject, Detail: detail, CreatedAt: b.PublishedAt}
	ev := toolplane.ControlEvent(by, toolplane.AuditPolicy, outcome, c.Subject, b.PublishedAt)
	ev.PolicyBundle, ev.Reason = b.Version, b.Note
	return c, ev
}

// The audit outcomes of the policy trail (kind policy): a version
// published, an earlier version's rules published again, the rules
// disabled.
const (
	PublishedOutcome  = "published"
	RolledBackOutcome = "rolled_back"
	DisabledOutcome   = "disabled"
)

// zone answers the location named, UTC for "".
func zone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		return nil, fmt.Errorf("%w: time zone %q is not an IANA zone name", toolplane.ErrInvalid, name)
	}
	return loc, nil
}

// List answers the organization's versions, newest first, older than
// before when it is set, without their files.
func (s *Service) List(ctx context.Context, before int64, limit int, by *toolplane.Credential) ([]toolplane.PolicyBundle, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	return s.store.ListPolicyBundles(ctx, by.OrganizationID, before, limit)
}

// Show answers one version with its files; version 0 is the latest.
func (s *Service) Show(ctx context.Context, version int64, by *toolplane.Credential) (*toolplane.PolicyBundle, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	if version == 0 {
		v, err := s.store.PolicyBundleVersion(ctx, by.OrganizationID)
		if err != nil {
			return nil, fmt.Errorf("show policy bundle: %w", err)
		}
		if v == 0 {
			return nil, fmt.Errorf("show policy bundle: none is published: %w", toolplane.ErrNotFound)
		}
		version = v
	}
	return s.store.GetPolicyBundle(ctx, by.OrganizationID, version)
}
