// Package approval keeps the calls that wait for a person: filing one with
// the exact arguments and their hash, resolving it by an authorised
// approver, and answering whether an approval covers a call. An approval is
// bound to its arguments hash: approving one call never authorises
// another.
//
// Who may read approvals and who may answer one is this package's rule
// (MayRead, MayDecide), applied by the Service to the credential each
// operation is given, so every door, the jobs and the tests decide it the
// same way.
package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/canonical"
	"github.com/toolplane/toolplane/schema"
)

// Errors a resolution is refused with. Each refines a kind of toolplane's
// vocabulary, so every door answers it by that kind (httperr.Classify)
// without knowing this package: the approval's state, or the call's, no
// longer allows the answer, which is a conflict; a caller who may not
// answer is forbidden.
var (
	ErrNotPending    = toolplane.Refine(toolplane.ErrConflict, "approval is not pending")
	ErrExpired       = toolplane.Refine(toolplane.ErrConflict, "approval expired")
	ErrNotAuthorized = toolplane.Refine(toolplane.ErrForbidden, "not an authorised approver")
	ErrTampered      = toolplane.Refine(toolplane.ErrConflict, "approval arguments do not match their hash")
	ErrStale         = toolplane.Refine(toolplane.ErrConflict, "the tool changed since the approval was filed")
)

// ErrKeyReused refuses a filing whose idempotency key already names
// another call of the same tool (other arguments) that waits for a
// person: a key is one call, and one call has one pending approval. It
// is a toolplane.ErrConflict; the error names the approval.
var ErrKeyReused = toolplane.Refine(toolplane.ErrConflict, "the idempotency key names another call that waits for approval")

// fileTries bounds File's tries: each one after the first follows an
// approval of the call that expired while it waited, applied here.
const fileTries = 4

// DefaultTTL is how long an approval waits before its default applies.
const DefaultTTL = 24 * time.Hour

// DenyOnTimeout is the default on timeout: an approval nobody answered
// denies.
const DenyOnTimeout = "deny"

// MayRead refuses a caller who may not read the organization's approvals:
// a person holding the approver or auditor role. Reads act in the caller's
// organization only. what names the read ("listing approvals"), which the
// refusal's words begin with.
func MayRead(by *toolplane.Credential, what string) error {
	if !by.HasAnyRole(toolplane.RoleApprover, toolplane.RoleAuditor) {
		return toolplane.Refuse(by, ErrNotAuthorized, what+" needs the approver or auditor role")
	}
	return nil
}

// MayAnswer refuses a caller who may answer no approval at all: a person's
// key with the approver role is needed, whichever approval it is.
func MayAnswer(by *toolplane.Credential) error {
	if by == nil || by.Kind != toolplane.CredentialPerson || !by.HasAnyRole(toolplane.RoleApprover) {
		return toolplane.Refuse(by, ErrNotAuthorized, "answering approvals needs a person's key with the approver role")
	}
	return nil
}

// MayDecide refuses a caller who may not answer approval a: one who may
// answer none (MayAnswer); one outside the approval's group, when it has
// one (membership is the role "group:<name>", see toolplane.InGroup); and
// the requester — the principal that asked, or the person it asked on
// behalf of — since an approval is a second person's judgement (four
// eyes), never the asker's own; anyone but the one person named, when a
// rule named one (the requester's manager); and one who already approved
// an approval that needs several distinct people. An approval whose
// stored invocation cannot be read names no one it could be checked
// against, and is refused.
func MayDecide(by *toolplane.Credential, a *toolplane.Approval) error {
	if err := MayAnswer(by); err != nil {
		return err
	}
	if a.ApproverGroup != "" && !by.InGroup(a.ApproverGroup) {
		return toolplane.Refuse(by, ErrNotAuthorized, "this approval is for the group "+a.ApproverGroup)
	}
	if a.Approver != "" && by.Subject != a.Approver {
		return toolplane.Refuse(by, ErrNotAuthorized, "this approval is for "+a.Approver+" to answer")
	}
	if slices.Contains(a.ApprovedBy, by.Subject) {
		return toolplane.Refuse(by, ErrNotAuthorized, fmt.Sprintf("you have approved this call already; it needs %d distinct approvers", a.Approvers))
	}
	inv, err := DecodeInvocation(a.Invocation)
	if by.OrganizationID != a.OrganizationID || by.Subject == "" || by.Subject == a.PrincipalID || err != nil || by.Subject == inv.UserID {
		return toolplane.Refuse(by, ErrNotAuthorized, "you may not answer this approval")
	}
	return nil
}

// Service files and resolves approvals.
type Service struct {
	store toolplane.ApprovalStore
	usage toolplane.UsageStore
	now   func() time.Time
	ttl   time.Duration
	// decided is Config.Decided, never nil.
	decided func(*toolplane.Approval)
}

// Config is what a Service is built from. Store is required; the rest
// have defaults.
type Config struct {
	Store toolplane.ApprovalStore
	// Usage is the meter a card's cost estimate is read from; nil answers
	// ErrNoMeter to Estimate and Spend, and files and answers approvals
	// all the same.
	Usage toolplane.UsageStore
	// Now is the clock approvals are filed, expired and answered by;
	// nil is time.Now.
	Now func() time.Time
	// TTL is how long an approval waits when its tool names no wait;
	// zero is DefaultTTL.
	TTL time.Duration
	// Decided, when set, is told of each approval this service decided
	// (approved, rejected or expired), after the decision is stored: the
	// metrics time the wait from filing to decision with it.
	Decided func(*toolplane.Approval)
}

// New answers a service built from cfg.
func New(cfg Config) *Service {
	now, ttl := cfg.Now, cfg.TTL
	if now == nil {
		now = time.Now
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	decided := cfg.Decided
	if decided == nil {
		decided = func(*toolplane.Approval) {}
	}
	return &Service{store: cfg.Store, usage: cfg.Usage, now: now, ttl: ttl, decided: decided}
}

// File stores a new pending approval, unless the call (its organization,
// tool and key) already waits for a person: one call has one pending
// approval, which the store enforces, so identical calls filed at the
// same moment, or from another session or run under the caller's key, are
// all answered the one approval. existing reports that case; a is then
// that approval. Otherwise ID, status and creation time are filled in, and
// the expiry too (the service's wait) when a leaves it empty. The default
// on timeout is escalate only when a asks for it; anything else is deny,
// so no caller can file an approval that allows on silence.
//
// A pending approval of the call past its expiry, with the default deny,
// is expired here (its audit event with it) and a is filed in its place:
// past its expiry the same call is a new proposal. One whose default is
// escalate is answered as it is: the expiry job replaces it with the next
// group's. One of other arguments under the same key is refused with
// ErrKeyReused.
func (s *Service) File(ctx context.Context, a *toolplane.Approval) (existing bool, err error) {
	now := s.now()
	a.ID = toolplane.NewID("apr_")
	a.Status = toolplane.ApprovalPending
	if a.DefaultOnTimeout != toolplane.OnTimeoutEscalate {
		a.DefaultOnTimeout = DenyOnTimeout
	}
	a.CreatedAt = now
	// The preview is only ever shown, to the person and to the agent; it
	// is stored as shown.
	a.Preview, _ = boundary.RedactSecrets(a.Preview)
	if a.ExpiresAt.IsZero() {
		a.ExpiresAt = now.Add(s.ttl)
	}
	for range fileTries {
		got, err := s.store.FileApproval(ctx, a)
		if err != nil {
			return false, fmt.Errorf("file approval for %s: %w", a.Tool, err)
		}
		if got.ID == a.ID {
			return false, nil
		}
		if !now.Before(got.ExpiresAt) && got.DefaultOnTimeout != toolplane.OnTimeoutEscalate {
			if _, err := s.Expire(ctx, got); err != nil {
				return false, fmt.Errorf("file approval for %s: %w", a.Tool, err)
			}
			continue
		}
		if got.ArgumentsHash != a.ArgumentsHash {
			return false, fmt.Errorf("file approval for %s: %w (approval %s)", a.Tool, ErrKeyReused, got.ID)
		}
		*a = *got
		return true, nil
	}
	return false, fmt.Errorf("file approval for %s: %w: its pending approval kept expiring while filing", a.Tool, toolplane.ErrConflict)
}

// Shown returns a as it is shown to a person (in a listing, a console, an
// answer to the agent that asked): its arguments and its preview with every
// credential redacted by the boundary's rule, by field name and by shape.
// The stored approval, whose arguments the approved call runs with and
// whose hash they must match, is not changed.
func Shown(a toolplane.Approval) toolplane.Approval {
	a.Arguments = boundary.RedactJSON(a.Arguments)
	a.Preview, _ = boundary.RedactSecrets(a.Preview)
	return a
}

// ShownWith is Shown, with every value the tool's input schema marks
// x-sensitive hidden too: sensitive are the schema's pointers
// (schema.Schema.Sensitive). Each such value is replaced wherever it
// appears, in the arguments and in the preview (which may quote it), so a
// secret the tool declares is masked even when its name and shape look
// harmless.
func ShownWith(a toolplane.Approval, sensitive []string) toolplane.Approval {
	values := sensitiveValues(a.Arguments, sensitive)
	a.Arguments = ShownArguments(a.Arguments, sensitive)
	a.Preview, _ = boundary.RedactSecrets(a.Preview)
	a.Reason, _ = boundary.RedactSecrets(a.Reason)
	for _, v := range values {
		a.Preview = strings.ReplaceAll(a.Preview, v, boundary.Redacted)
		a.Reason = strings.ReplaceAll(a.Reason, v, boundary.Redacted)
	}
	return a
}

// ShownArguments answers a call's stored arguments as a person is shown
// them (an approval's, an uncertain action's): every credential redacted
// by the boundary's rule (boundary.RedactJSON), and every value the tool's
// input schema marks x-sensitive (the pointers sensitive) hidden wherever
// it appears.
func ShownArguments(args []byte, sensitive []string) []byte {
	values := sensitiveValues(args, sensitive)
	shown := boundary.RedactJSON(args)
	if len(values) == 0 {
		return shown
	}
	dec := json.NewDecoder(bytes.NewReader(shown))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return shown
	}
	return boundary.Encode(nil, boundary.Hide(v, values))
}

// sensitiveValues answers the non-empty string values args (JSON) holds
// at the pointers sensitive.
func sensitiveValues(args []byte, sensitive []string) []string {
	if len(sensitive) == 0 || len(args) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return slices.DeleteFunc(schema.SensitiveValues(v, sensitive), func(s string) bool { return s == "" })
}

// Get answers an approval of the caller's organization, to a caller who
// may read approvals (MayRead); another organization's is not found.
func (s *Service) Get(ctx context.Context, id string, by *toolplane.Credential) (*toolplane.Approval, error) {
	if err := MayRead(by, "reading approvals"); err != nil {
		return nil, err
	}
	return s.Find(ctx, by.OrganizationID, id)
}

// List answers the caller's organization's approvals in a state, to a
// caller who may read approvals (MayRead).
func (s *Service) List(ctx context.Context, status toolplane.ApprovalStatus, after string, limit int, by *toolplane.Credential) ([]toolplane.Approval, string, error) {
	if err := MayRead(by, "listing approvals"); err != nil {
		return nil, "", err
	}
	as, next, err := s.store.ListApprovals(ctx, by.OrganizationID, status, after, limit)
	if err != nil {
		return nil, "", fmt.Errorf("list approvals: %w", err)
	}
	return as, next, nil
}

// Recent answers the caller's organization's approvals in a state, newest
// first, to a caller who may read approvals (MayRead): the history a person
// reads.
func (s *Service) Recent(ctx context.Context, status toolplane.ApprovalStatus, after string, limit int, by *toolplane.Credential) ([]toolplane.Approval, string, error) {
	if err := MayRead(by, "listing approvals"); err != nil {
		return nil, "", err
	}
	as, next, err := s.store.ListApprovalsNewest(ctx, by.OrganizationID, status, nil, after, limit)
	if err != nil {
		return nil, "", fmt.Errorf("list approvals: %w", err)
	}
	return as, next, nil
}

// EstimateWindow is how far back a cost estimate looks: recent calls, so a
// provider's new prices show within a month.
const EstimateWindow = 30 * 24 * time.Hour

// ErrNoMeter: the service was built without a meter to read.
var ErrNoMeter = errors.New("no meter is wired to estimate costs")

// Estimate answers what the meter recorded of tool's calls in the caller's
// organization over the last EstimateWindow (at most the newest
// toolplane.MaxUsageSample of them), to a caller who may read approvals
// (MayRead): what a person deciding a metered call is told it will likely
// cost.
func (s *Service) Estimate(ctx context.Context, tool string, by *toolplane.Credential) (toolplane.UsageStats, error) {
	if err := MayRead(by, "reading cost estimates"); err != nil {
		return toolplane.UsageStats{}, err
	}
	if s.usage == nil {
		return toolplane.UsageStats{}, ErrNoMeter
	}
	st, err := s.usage.ToolUsage(ctx, by.OrganizationID, tool, s.now().Add(-EstimateWindow))
	if err != nil {
		return toolplane.UsageStats{}, fmt.Errorf("estimate the cost of %s: %w", tool, err)
	}
	return st, nil
}

// Spend answers what a run tree of the caller's organization has spent so
// far, to a caller who may read approvals (MayRead): beside an estimate, it
// tells how close an approved call brings the run to its ceiling.
func (s *Service) Spend(ctx context.Context, rootRunID string, by *toolplane.Credential) (int64, error) {
	if err := MayRead(by, "reading a run's spend"); err != nil {
		return 0, err
	}
	if s.usage == nil {
		return 0, ErrNoMeter
	}
	total, err := s.usage.RunTreeCost(ctx, by.OrganizationID, rootRunID)
	if err != nil {
		return 0, fmt.Errorf("spend of run tree %s: %w", rootRunID, err)
	}
	return total, nil
}

// inboxReads bounds the store reads one page of an inbox makes: a page
// whose reads found fewer approvals the person may answer than it asks
// for ends short, with a cursor to go on from.
const inboxReads = 4

// Filter is what a person narrows a list of approvals by: the store's
// conditions (toolplane.ApprovalFilter), read in its query, and the amount
// the approval's preview names (PreviewAmount), which no column holds.
type Filter struct {
	toolplane.ApprovalFilter
	// MinCents and MaxCents, when set, bound the amount the preview names,
	// in hundredths of its unit, both included: an approval whose preview
	// names no amount is left out once either is set.
	MinCents, MaxCents *int64
}

// amountOK reports whether a's preview names an amount within f's bounds,
// or f sets none.
func (f Filter) amountOK(a *toolplane.Approval) bool {
	if f.MinCents == nil && f.MaxCents == nil {
		return true
	}
	v, ok := PreviewAmount(a.Preview)
	return ok && (f.MinCents == nil || v >= *f.MinCents) && (f.MaxCents == nil || v <= *f.MaxCents)
}

// agentOK reports whether a is of f's agent, or f names none. The store
// narrows by the bytes of the invocation's field; its agent is read here
// whole, so a name written in a token's claims or a person's attributes
// (maps inside the same invocation) never passes for the agent.
func (f Filter) agentOK(a *toolplane.Approval) bool {
	if f.Agent == "" || a.PrincipalID == f.Agent {
		return true
	}
	inv, err := DecodeInvocation(a.Invocation)
	return err == nil && inv.AgentID == f.Agent
}

// amount is an amount in a preview: a currency sign before a number, a
// currency code or sign after one ("$1,200.50", "12.50 EUR", "€ 3"), or
// else a number with two decimals standing alone ("Refund 12.90 on
// order o-1"; not a version's "1.20.3").
var (
	amount     = regexp.MustCompile(`(?:[$€£¥]\s?(\d[\d,]*(?:\.\d{1,2})?)\b)|(?:\b(\d[\d,]*(?:\.\d{1,2})?)\s?(?:[A-Z]{3}\b|[$€£¥]))`)
	bareAmount = regexp.MustCompile(`(?:^|[^\d.,])(\d[\d,]*\.\d{2})(?:[^\d.]|\.(?:\s|$)|$)`)
)

// PreviewAmount answers the first amount of money a preview names, in
// hundredths of its unit (the currency is not converted: an inbox is
// narrowed by the figure a person reads), and whether it names one.
func PreviewAmount(preview string) (int64, bool) {
	var n string
	if m := amount.FindStringSubmatch(preview); m != nil {
		n = m[1] + m[2] // one of the two is set
	} else if m := bareAmount.FindStringSubmatch(preview); m != nil {
		n = m[1]
	} else {
		return 0, false
	}
	whole, frac, _ := strings.Cut(strings.ReplaceAll(n, ",", ""), ".")
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/100-1 {
		return 0, false
	}
	var f int64
	if frac != "" {
		f, _ = strconv.ParseInt((frac + "0")[:2], 10, 64)
	}
	return w*100 + f, true
}

// Inbox answers the pending approvals by may answer (MayDecide) and that
// are not past their expiry, newest first, after the cursor: a person's
// inbox. A caller who may answer no approval (MayAnswer) is refused. The
// store reads only the approvals routed to no group or to one of by's
// (see groupsOf); MayDecide then judges each, so an approval the person
// asked for themselves, one named for another person to answer, or one
// they approved already is not shown. A page may hold fewer than limit
// approvals and still have a next cursor.
func (s *Service) Inbox(ctx context.Context, after string, limit int, by *toolplane.Credential) ([]toolplane.Approval, string, error) {
	return s.InboxMatching(ctx, Filter{}, after, limit, by)
}

// InboxMatching is Inbox narrowed by f: the store reads only what f's
// conditions match, and the amount is judged as MayDecide is, approval
// by approval, in the same bounded reads.
func (s *Service) InboxMatching(ctx context.Context, f Filter, after string, limit int, by *toolplane.Credential) ([]toolplane.Approval, string, error) {
	if err := MayAnswer(by); err != nil {
		return nil, "", err
	}
	now := s.now()
	out, next, err := s.search(ctx, by.OrganizationID, toolplane.ApprovalPending, groupsOf(by), f, after, limit, func(a *toolplane.Approval) bool {
		return now.Before(a.ExpiresAt) && MayDecide(by, a) == nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list the inbox of %s: %w", by.Subject, err)
	}
	return out, next, nil
}

// RecentMatching is Recent narrowed by f, to a caller who may read
// approvals (MayRead). A page may hold fewer than limit approvals and
// still have a next cursor when f bounds the amount.
func (s *Service) RecentMatching(ctx context.Context, status toolplane.ApprovalStatus, f Filter, after string, limit int, by *toolplane.Credential) ([]toolplane.Approval, string, error) {
	if err := MayRead(by, "listing approvals"); err != nil {
		return nil, "", err
	}
	out, next, err := s.search(ctx, by.OrganizationID, status, nil, f, after, limit, func(*toolplane.Approval) bool { return true })
	if err != nil {
		return nil, "", fmt.Errorf("list approvals: %w", err)
	}
	return out, next, nil
}

// search reads the organization's approvals in status that f's
// conditions match, newest first, in at most inboxReads reads, keeping
// those keep and f's amount accept.
func (s *Service) search(ctx context.Context, org string, status toolplane.ApprovalStatus, groups []string, f Filter, after string, limit int, keep func(*toolplane.Approval) bool) ([]toolplane.Approval, string, error) {
	var out []toolplane.Approval
	next := after
	for range inboxReads {
		// Each read asks for what the page still lacks, so a full page
		// ends where a read did, at a cursor the store made.
		as, cur, err := s.store.SearchApprovals(ctx, org, status, groups, f.ApprovalFilter, next, limit-len(out))
		if err != nil {
			return nil, "", err
		}
		for i := range as {
			if keep(&as[i]) && f.amountOK(&as[i]) && f.agentOK(&as[i]) {
				out = append(out, as[i])
			}
		}
		next = cur
		if next == "" || len(out) == limit {
			break
		}
	}
	return out, next, nil
}

// groupsOf answers the approver groups whose approvals by may answer, as
// the store filters by them: "" (an approval routed to no group) and each
// group by is a member of (MayDecide's rule, toolplane.InGroup). nil (every
// group) for a credential that holds every group's role (platform_admin)
// or is in more groups than the store filters by; MayDecide judges each
// approval either way.
func groupsOf(by *toolplane.Credential) []string {
	if by.HasAnyRole(toolplane.RolePlatformAdmin) {
		return nil // it holds every role, every group's among them
	}
	groups := []string{""}
	for _, r := range by.Roles {
		if g, ok := strings.CutPrefix(r, toolplane.GroupRolePrefix); ok && g != "" && by.InGroup(g) && !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	if len(groups) > toolplane.MaxApprovalGroups {
		return nil
	}
	return groups
}

// Find answers an approval of the organization, to the platform itself
// (the invoker reading the approval a call names, a background job): no
// person asked, so no credential is checked. A person's read is Get.
func (s *Service) Find(ctx context.Context, org, id string) (*toolplane.Approval, error) {
	return s.store.GetApproval(ctx, org, id)
}

// Covers reports whether approval a covers a call: the same organization,
// tool, arguments hash and idempotency key. The key names the call: one
// derived from the run holds the run (and step), and a caller's own key
// names the same call in whichever run or session repeats it, as the
// journal takes it. An approval of another proposal, even in the same run
// with the same arguments (another step, or another caller key), covers
// nothing: one approval is one effect.
func Covers(a *toolplane.Approval, org, tool, argsHash, key string) bool {
	return a.OrganizationID == org && a.Tool == tool && a.ArgumentsHash == argsHash && a.Key == key
}

// Mismatch says why approval a, of another run, is not the call inv makes
// of tool with arguments hash argsHash: filed for another agent, for
// another person the agent acts for, for another tenant, for another tool
// or other arguments. It answers "" when a is the same call, asked by the
// same agent for the same person and tenant (its state is the caller's to
// judge). The tenant counts because a person approved the effect on one
// tenant's data; the same arguments on another tenant's are another
// effect. The words are the model's to read.
func Mismatch(a *toolplane.Approval, inv *toolplane.Invocation, tool, argsHash string) string {
	stored, err := DecodeInvocation(a.Invocation)
	switch {
	case a.OrganizationID != inv.OrganizationID:
		return fmt.Sprintf("approval %s does not exist in this organization", a.ID)
	case err != nil, a.PrincipalID != inv.Principal.ID, stored.AgentID != inv.AgentID:
		return fmt.Sprintf("approval %s was filed for another agent's call; an approval authorizes only the agent that asked", a.ID)
	case stored.UserID != inv.UserID:
		return fmt.Sprintf("approval %s was filed for a call on behalf of another person", a.ID)
	case stored.TenantID != inv.TenantID:
		return fmt.Sprintf("approval %s was filed for a call for another tenant", a.ID)
	case a.Tool != tool:
		return fmt.Sprintf("approval %s is for another tool (%s)", a.ID, a.Tool)
	case a.ArgumentsHash != argsHash:
		return fmt.Sprintf("approval %s is for other arguments; an approval covers exactly the arguments it was filed with", a.ID)
	}
	return ""
}

// Open answers the approval, filed by the same agent (for the same person)
// for the same call in another run, that a call in a new session is offered
// instead of a new filing: the newest approved one, else the newest
// pending one, among those not past their expiry; nil when there is none.
//
// Offering it is safe because it is only that: a pending approval answers
// that the call still waits for it, and an approved one runs the call it
// approved, under its own idempotency key, so the journal makes the effect
// once whichever session asks. The expiry bounds the offer: past it, the
// same arguments are a new proposal for a person to judge.
func (s *Service) Open(ctx context.Context, inv *toolplane.Invocation, tool, argsHash string) (*toolplane.Approval, error) {
	now := s.now()
	as, err := s.store.FindOpenApprovals(ctx, inv.OrganizationID, inv.Principal.ID, tool, argsHash, now)
	if err != nil {
		return nil, fmt.Errorf("open approvals of %s: %w", tool, err)
	}
	var pending *toolplane.Approval
	for i := range as {
		a := &as[i]
		if !now.Before(a.ExpiresAt) || Mismatch(a, inv, tool, argsHash) != "" {
			continue
		}
		switch {
		case a.Status == toolplane.ApprovalApproved:
			return a, nil
		case a.Status == toolplane.ApprovalPending && pending == nil:
			pending = a
		}
	}
	return pending, nil
}

// Offered says whether approval a, the same call as the one asking (see
// Mismatch) in another run, may stand for it now: approved or pending, and
// not past its expiry. Otherwise it answers why not, in words the model
// reads.
func (s *Service) Offered(a *toolplane.Approval) (bool, string) {
	switch {
	case a.Status == toolplane.ApprovalRejected:
		why := fmt.Sprintf("a person rejected approval %s", a.ID)
		if a.Reason != "" {
			why += " (" + a.Reason + ")"
		}
		return false, why
	case a.Status == toolplane.ApprovalExpired, !s.now().Before(a.ExpiresAt):
		return false, fmt.Sprintf("approval %s expired at %s", a.ID, a.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return true, ""
}

// Earlier is what earlier approvals say about a call about to be filed.
// Each field is the newest approval of this exact call in that state, or
// nil.
type Earlier struct {
	// Rejected: a person refused this call; it answers rejected.
	Rejected *toolplane.Approval
	// Pending: the call already waits for a person; it is not filed twice.
	Pending *toolplane.Approval
	// Approved: a person approved this call. Asking again is the call it
	// approved (the journal makes the effect once, whether this call or
	// the background execution of the approval runs it first), so it is
	// not filed again to wait for a second person.
	Approved *toolplane.Approval
	// Reused: the key names another call of the tool (other arguments)
	// that waits for a person; this one is a conflict, not a filing.
	Reused *toolplane.Approval
}

// Prior answers what earlier approvals say about a call about to be
// filed: a rejection of this exact call (same key, tool and arguments
// hash), an approval of it, or a pending approval still waiting for it,
// in whichever run or session it was asked (the key names the call). The
// key alone is never trusted: two tools can share a key, so the tool and
// hash are compared; a pending approval of the key and tool with other
// arguments is answered as Reused.
func (s *Service) Prior(ctx context.Context, org, key, tool, argsHash string) (Earlier, error) {
	var e Earlier
	as, err := s.store.FindApprovals(ctx, org, tool, key)
	if err != nil {
		return e, fmt.Errorf("prior approvals of %s: %w", key, err)
	}
	now := s.now()
	for i := range as {
		a := &as[i]
		if !Covers(a, org, tool, argsHash, key) {
			if a.OrganizationID == org && a.Tool == tool && a.Key == key && a.Status == toolplane.ApprovalPending && now.Before(a.ExpiresAt) && e.Reused == nil {
				e.Reused = a
			}
			continue
		}
		switch {
		case a.Status == toolplane.ApprovalRejected && e.Rejected == nil:
			e.Rejected = a
		case a.Status == toolplane.ApprovalApproved && e.Approved == nil:
			e.Approved = a
		case a.Status == toolplane.ApprovalPending && now.Before(a.ExpiresAt) && e.Pending == nil:
			e.Pending = a
		}
	}
	return e, nil
}

// Decision is a person's answer to an approval; who answers is the
// credential Resolve is given.
type Decision struct {
	Approve bool
	Reason  string
}

// Resolve records the answer of by, a person of the approval's
// organization. It refuses (a *toolplane.DeniedError wrapping
// ErrNotAuthorized) a caller MayDecide refuses, before the approval's state
// is looked at or changed; then an approval that is not pending, one past
// its expiry (which it marks expired, the default of deny applying),
// arguments that no longer match their hash, and a tool that changed
// (check answers ErrStale or another error). A refusal answers the approval
// as it is, when it was found.
func (s *Service) Resolve(ctx context.Context, id string, d Decision, by *toolplane.Credential, check func(*toolplane.Approval) error) (*toolplane.Approval, error) {
	org := ""
	if by != nil {
		org = by.OrganizationID
	}
	a, err := s.store.GetApproval(ctx, org, id)
	if err != nil {
		if rerr := MayAnswer(by); rerr != nil {
			// A caller who may answer no approval is told so, not
			// whether this one exists.
			return nil, fmt.Errorf("resolve approval %s: %w", id, rerr)
		}
		return nil, fmt.Errorf("resolve approval %s: %w", id, err)
	}
	if err := MayDecide(by, a); err != nil {
		return a, fmt.Errorf("resolve approval %s: %w", id, err)
	}
	if a.Status != toolplane.ApprovalPending {
		return a, fmt.Errorf("resolve approval %s: %w (it is %s)", id, ErrNotPending, a.Status)
	}
	now := s.now()
	if !now.Before(a.ExpiresAt) {
		// Past its expiry the default applies. Deny can be applied here;
		// escalate belongs to the expiry job, which files the next approval.
		if a.DefaultOnTimeout != toolplane.OnTimeoutEscalate {
			if _, err := s.Expire(ctx, a); err != nil {
				return nil, err
			}
		}
		return a, fmt.Errorf("resolve approval %s: %w at %s", id, ErrExpired, a.ExpiresAt.Format(time.RFC3339))
	}
	if d.Approve {
		if err := verifyHash(a); err != nil {
			return a, fmt.Errorf("resolve approval %s: %w", id, err)
		}
		if check != nil {
			if err := check(a); err != nil {
				return a, fmt.Errorf("resolve approval %s: %w", id, err)
			}
		}
	}
	next := *a
	next.Status = toolplane.ApprovalRejected
	if d.Approve {
		next.Status = toolplane.ApprovalApproved
		// An approval a rule gave to several people stays pending until
		// that many distinct people approved; one rejection ends it.
		if a.Approvers > 1 {
			next.ApprovedBy = append(slices.Clone(a.ApprovedBy), by.Subject)
		}
		if len(next.ApprovedBy) < a.Approvers {
			next.Status = toolplane.ApprovalPending
			// One person's approval of several is a decision of theirs,
			// recorded with it; the approval stays pending.
			ev := DecidedEvent(&next, by, ApprovedOutcome, now)
			ev.Reason = fmt.Sprintf("%d of %d approvals", len(next.ApprovedBy), a.Approvers)
			ok, err := s.store.UpdateApprovalAudited(ctx, &next, ev)
			if err != nil {
				return nil, fmt.Errorf("resolve approval %s: %w", id, err)
			}
			if !ok {
				return nil, fmt.Errorf("resolve approval %s: %w (answered concurrently; answer again)", id, ErrNotPending)
			}
			return &next, nil
		}
	}
	next.ResolvedAt, next.ResolvedBy, next.Reason = now, by.Subject, d.Reason
	outcome := RejectedOutcome
	if next.Status == toolplane.ApprovalApproved {
		outcome = ApprovedOutcome
	}
	// The decision and its event are one write: a decision repeated (or
	// raced) loses the compare-and-swap and records nothing.
	ok, err := s.store.UpdateApprovalAudited(ctx, &next, DecidedEvent(&next, by, outcome, now))
	if err != nil {
		return nil, fmt.Errorf("resolve approval %s: %w", id, err)
	}
	if !ok {
		return nil, fmt.Errorf("resolve approval %s: %w (resolved concurrently)", id, ErrNotPending)
	}
	s.decided(&next)
	return &next, nil
}

// Expire applies an approval's default on timeout (deny): it marks a
// pending approval past its expiry expired, with its "approval_expired"
// audit event in the same transaction (whoever finds it expired: the
// expiry job, or a person answering too late), and reports whether it did.
func (s *Service) Expire(ctx context.Context, a *toolplane.Approval) (bool, error) {
	if a.Status != toolplane.ApprovalPending || s.now().Before(a.ExpiresAt) {
		return false, nil
	}
	next := *a
	next.Status, next.ResolvedAt, next.Reason = toolplane.ApprovalExpired, s.now(), "expired: default "+a.DefaultOnTimeout
	ok, err := s.store.UpdateApprovalAudited(ctx, &next, ExpiredEvent(&next))
	if err != nil {
		return false, fmt.Errorf("expire approval %s: %w", a.ID, err)
	}
	if ok {
		*a = next
		s.decided(a)
	}
	return ok, nil
}

// Escalate applies an approval's default of escalate: a pending approval
// past its expiry is marked expired, naming the approval that replaces it,
// and a new pending approval of the same call is filed for group at the
// next level, waiting ttl; the approval_escalated event, naming the
// successor, is stored with the first change. The successor's id is derived from its
// predecessor's, and each step is conditional, so running Escalate again
// after a failure (or on a second node) completes the same escalation
// instead of starting another.
func (s *Service) Escalate(ctx context.Context, a *toolplane.Approval, group string, ttl time.Duration) (*toolplane.Approval, error) {
	switch {
	case a.Status == toolplane.ApprovalPending && s.now().Before(a.ExpiresAt):
		return nil, fmt.Errorf("escalate approval %s: %w (it has not expired)", a.ID, ErrNotPending)
	case a.Status != toolplane.ApprovalPending && a.Status != toolplane.ApprovalExpired:
		return nil, fmt.Errorf("escalate approval %s: %w (it is %s)", a.ID, ErrNotPending, a.Status)
	}
	if ttl <= 0 {
		ttl = s.ttl
	}
	now := s.now()
	next := *a
	next.ID = a.ID + "_e" + strconv.Itoa(a.Level+1)
	next.Level = a.Level + 1
	next.ApproverGroup = group
	next.EscalatedFrom = a.ID
	next.Status = toolplane.ApprovalPending
	next.CreatedAt, next.ExpiresAt = now, now.Add(ttl)
	next.ResolvedAt, next.ResolvedBy, next.Reason, next.Version = time.Time{}, "", "", 0
	// The next group judges afresh: the approvals given at this level,
	// and a person a rule named, stay with it.
	next.ApprovedBy, next.Approver = nil, ""

	if a.Status == toolplane.ApprovalPending {
		old := *a
		old.Status, old.ResolvedAt, old.Reason = toolplane.ApprovalExpired, now, "expired: escalated to "+next.ID+" ("+group+")"
		// The approval_escalated event is stored with the change: a retry
		// finds the approval expired already, and its event with it.
		ok, err := s.store.UpdateApprovalAudited(ctx, &old, Event(&old, EscalatedOutcome, next.ID, now))
		if err != nil {
			return nil, fmt.Errorf("escalate approval %s: %w", a.ID, err)
		}
		if !ok {
			return nil, fmt.Errorf("escalate approval %s: %w (changed concurrently)", a.ID, ErrNotPending)
		}
		s.decided(&old)
		*a = old
	}
	// Filed as any approval is: should the agent have asked again since
	// a expired and a new approval of the call wait already, that one
	// stands for the call and no second is filed beside it.
	got, err := s.store.FileApproval(ctx, &next)
	if errors.Is(err, toolplane.ErrExists) {
		existing, gerr := s.store.GetApproval(ctx, a.OrganizationID, next.ID)
		if gerr != nil {
			return nil, fmt.Errorf("escalate approval %s: %w", a.ID, gerr)
		}
		return existing, nil
	}
	if err != nil {
		return nil, fmt.Errorf("escalate approval %s: file the next approval: %w", a.ID, err)
	}
	return got, nil
}

func verifyHash(a *toolplane.Approval) error {
	h, err := canonical.HashJSON(a.Arguments)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTampered, err)
	}
	if h != a.ArgumentsHash {
		return ErrTampered
	}
	return nil
}

// EncodeInvocation stores an invocation on an approval, so the approved call
// runs under the identity it was proposed with.
func EncodeInvocation(inv *toolplane.Invocation) ([]byte, error) { return json.Marshal(inv) }

// ExpiredOutcome is the audit outcome of an approval nobody answered in
// time, denied by its default.
const ExpiredOutcome = "approval_expired"

// EscalatedOutcome is the audit outcome of an approval nobody answered in
// time whose default is escalate: it expired, replaced by an approval of
// the same call for the next group.
const EscalatedOutcome = "approval_escalated"

// The audit outcomes of a person's decision on an approval.
const (
	ApprovedOutcome = "approved"
	RejectedOutcome = "rejected"
)

// DecidedEvent answers the audit event of by's decision (outcome
// ApprovedOutcome or RejectedOutcome) on a, at at: a control-plane event
// (kind approval) whose principal and approver are the person, made with
// the key by names, about the approval (its subject), naming the call it
// holds, never its arguments.
func DecidedEvent(a *toolplane.Approval, by *toolplane.Credential, outcome string, at time.Time) *toolplane.AuditEvent {
	ev := Event(a, outcome, "", at)
	ev.ID = toolplane.NewID("aud_")
	ev.Source = toolplane.SourceControl
	ev.PrincipalID, ev.ApproverID, ev.KeyID = by.Subject, by.Subject, by.ID
	ev.Reason = a.Reason
	return ev
}

// ExpiredEvent answers the audit event of a, expired.
func ExpiredEvent(a *toolplane.Approval) *toolplane.AuditEvent {
	return Event(a, ExpiredOutcome, "", a.ResolvedAt)
}

// Event answers the audit event of what became of approval a without a
// person's answer (expired, escalated, its execution given up), at at:
// one per approval and outcome (its ID is derived from both, so a retry
// finds it stored), naming the call it held, never its arguments. next,
// when set, is the approval that replaced a.
func Event(a *toolplane.Approval, outcome, next string, at time.Time) *toolplane.AuditEvent {
	ev := &toolplane.AuditEvent{
		ID: "aud_" + outcome + "_" + a.ID, OrganizationID: a.OrganizationID, RunID: a.RunID, StepPath: a.StepPath,
		Kind: toolplane.AuditApproval, Subject: a.ID,
		PrincipalID: a.PrincipalID, Tool: a.Tool, ToolVersion: a.ToolVersion, Source: toolplane.SourceWorker,
		Outcome: outcome, ArgumentsHash: a.ArgumentsHash, ApprovalID: a.ID, AuthorizedBy: next, Key: a.Key,
		Reason: a.Reason, CreatedAt: at,
	}
	if inv, err := DecodeInvocation(a.Invocation); err == nil {
		ev.AgentID, ev.UserID, ev.TenantID = inv.AgentID, inv.UserID, inv.TenantID
	}
	return ev
}

// DecodeInvocation reads the stored invocation back.
func DecodeInvocation(b []byte) (*toolplane.Invocation, error) {
	var inv toolplane.Invocation
	if err := json.Unmarshal(b, &inv); err != nil {
		return nil, fmt.Errorf("stored invocation: %w", err)
	}
	return &inv, nil
}
