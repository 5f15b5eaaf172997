package notify

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/boundary"
)

// Event is what a notification tells.
type Event string

// The events people are told of.
const (
	ApprovalFiled     Event = "approval_filed"
	ApprovalEscalated Event = "approval_escalated"
	// ApprovalExpiring: a pending approval expires within the lead time.
	ApprovalExpiring Event = "approval_expiring"
	// ApprovalDecided: approved, rejected, or expired unanswered.
	ApprovalDecided Event = "approval_decided"
	CallUncertain   Event = "call_uncertain"
)

// DefaultExpiryLead is how long before an approval's expiry its approvers
// are reminded.
const DefaultExpiryLead = 15 * time.Minute

// ErrGone: what a delivery is about (its channel, its approval or claim)
// no longer exists, so no later attempt can succeed.
var ErrGone = errors.New("notification subject or channel is gone")

// Delivery is one event's notification on one channel: its identity, and
// the background job's arguments.
type Delivery struct {
	Org     string `json:"org"`
	Event   Event  `json:"event"`
	Subject string `json:"subject"`
	Channel string `json:"channel"`
	// At, when set, is when the delivery is due (a reminder before
	// expiry); not part of its identity.
	At time.Time `json:"-"`
}

// ClaimSubject names an uncertain claim as a delivery's subject: its tool
// and its key, the key encoded, since a key may hold any byte.
func ClaimSubject(tool, key string) string {
	return "claim:" + tool + ":" + base64.RawURLEncoding.EncodeToString([]byte(key))
}

func parseClaimSubject(s string) (tool, key string, ok bool) {
	rest, ok := strings.CutPrefix(s, "claim:")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return "", "", false
	}
	k, err := base64.RawURLEncoding.DecodeString(rest[i+1:])
	if err != nil {
		return "", "", false
	}
	return rest[:i], string(k), true
}

// channelsFor answers the ids of the organization's channels serving
// group: the group's own, or the default ones when it has none.
func (s *Service) channelsFor(ctx context.Context, org, group string) ([]string, error) {
	cs, err := s.store.ListNotificationChannels(ctx, org)
	if err != nil {
		return nil, fmt.Errorf("channels of %s: %w", org, err)
	}
	var own, dflt []string
	for _, c := range cs {
		switch {
		case group != "" && c.Group == group:
			own = append(own, c.ID)
		case c.Group == "":
			dflt = append(dflt, c.ID)
		}
	}
	if len(own) > 0 {
		return own, nil
	}
	return dflt, nil
}

// ForApproval answers the deliveries of approval a's events named; a
// reminder (ApprovalExpiring) is due the lead time before the expiry,
// and is left out for an approval that lives shorter than that.
func (s *Service) ForApproval(ctx context.Context, a *toolplane.Approval, events ...Event) ([]Delivery, error) {
	chans, err := s.channelsFor(ctx, a.OrganizationID, a.ApproverGroup)
	if err != nil || len(chans) == 0 {
		return nil, err
	}
	var out []Delivery
	for _, ev := range events {
		var at time.Time
		if ev == ApprovalExpiring {
			at = a.ExpiresAt.Add(-s.lead)
			if a.Status != toolplane.ApprovalPending || !at.After(a.CreatedAt) {
				continue
			}
		}
		for _, ch := range chans {
			out = append(out, Delivery{Org: a.OrganizationID, Event: ev, Subject: a.ID, Channel: ch, At: at})
		}
	}
	return out, nil
}

// ForClaim answers the deliveries telling that claim c went uncertain, on
// the organization's default channels.
func (s *Service) ForClaim(ctx context.Context, c *toolplane.Claim) ([]Delivery, error) {
	chans, err := s.channelsFor(ctx, c.OrganizationID, "")
	if err != nil {
		return nil, err
	}
	out := make([]Delivery, 0, len(chans))
	for _, ch := range chans {
		out = append(out, Delivery{Org: c.OrganizationID, Event: CallUncertain, Subject: ClaimSubject(c.Tool, c.Key), Channel: ch})
	}
	return out, nil
}

// approvalEvents answers the events approval a has reached.
func approvalEvents(a *toolplane.Approval) []Event {
	first := ApprovalFiled
	if a.EscalatedFrom != "" {
		first = ApprovalEscalated
	}
	if a.Status == toolplane.ApprovalPending {
		return []Event{first, ApprovalExpiring}
	}
	return []Event{first, ApprovalDecided}
}

// sweepBatch bounds one read of the sweep.
const sweepBatch = 500

// Missed answers the deliveries of events since since that have no
// recorded ending: what a node lost between an approval's commit and the
// enqueueing of its notifications. Enqueueing them again is safe, since
// a delivery's job is unique.
func (s *Service) Missed(ctx context.Context, since time.Time) ([]Delivery, error) {
	var all []Delivery
	for from := since; ; {
		as, err := s.store.ApprovalsSince(ctx, from, sweepBatch)
		if err != nil {
			return nil, fmt.Errorf("notification sweep: %w", err)
		}
		for i := range as {
			ds, err := s.ForApproval(ctx, &as[i], approvalEvents(&as[i])...)
			if err != nil {
				return nil, err
			}
			all = append(all, ds...)
		}
		if len(as) < sweepBatch {
			break
		}
		// Rows of the last instant are read again; their deliveries are
		// unique, so that costs a lookup, not a message.
		last := as[len(as)-1]
		next := last.CreatedAt
		if last.ResolvedAt.After(next) {
			next = last.ResolvedAt
		}
		if !next.After(from) {
			break
		}
		from = next
	}
	for from := since; ; {
		cs, err := s.store.UncertainClaimsSince(ctx, from, sweepBatch)
		if err != nil {
			return nil, fmt.Errorf("notification sweep: %w", err)
		}
		for i := range cs {
			ds, err := s.ForClaim(ctx, &cs[i])
			if err != nil {
				return nil, err
			}
			all = append(all, ds...)
		}
		if len(cs) < sweepBatch || !cs[len(cs)-1].UpdatedAt.After(from) {
			break
		}
		from = cs[len(cs)-1].UpdatedAt
	}
	out := all[:0]
	for _, d := range all {
		_, err := s.store.GetDelivery(ctx, d.Org, string(d.Event), d.Subject, d.Channel)
		if errors.Is(err, toolplane.ErrNotFound) {
			out = append(out, d)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("notification sweep: %w", err)
		}
	}
	return out, nil
}

// Payload is the JSON document a webhook receives.
type Payload struct {
	Event Event `json:"event"`
	// Delivery names the event, subject and channel: the same on every
	// retry of one notification.
	Delivery       string           `json:"delivery"`
	OrganizationID string           `json:"organization_id"`
	Approval       *ApprovalContext `json:"approval,omitempty"`
	Call           *CallContext     `json:"call,omitempty"`
	Anomaly        *AnomalyContext  `json:"anomaly,omitempty"`
	// Link opens the approval in the console, once, until it expires.
	Link   string    `json:"link,omitempty"`
	SentAt time.Time `json:"sent_at"`
}

// ApprovalContext is what a person needs to judge an approval. Arguments
// are shown with every credential masked; every string is data from
// outside the platform, to be shown, never interpreted.
type ApprovalContext struct {
	ID            string          `json:"id"`
	Status        string          `json:"status"`
	Tool          string          `json:"tool"`
	ToolVersion   string          `json:"tool_version,omitempty"`
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	Preview       string          `json:"preview,omitempty"`
	AgentID       string          `json:"agent_id,omitempty"`
	PrincipalID   string          `json:"principal_id,omitempty"`
	UserID        string          `json:"user_id,omitempty"`
	RunID         string          `json:"run_id,omitempty"`
	Rule          string          `json:"rule,omitempty"`
	ApproverGroup string          `json:"approver_group,omitempty"`
	EscalatedFrom string          `json:"escalated_from,omitempty"`
	ExpiresAt     time.Time       `json:"expires_at"`
	ResolvedBy    string          `json:"resolved_by,omitempty"`
	Reason        string          `json:"reason,omitempty"`
}

// CallContext is what is known of a call that went uncertain, read when
// the notification is sent: Status is the claim's state then. A claim
// settled or completed since it went uncertain may no longer hold its
// arguments (a completed claim keeps only its answer), and the status
// tells the reader the action needs no more of them.
type CallContext struct {
	Tool      string          `json:"tool"`
	Status    string          `json:"status"`
	RunID     string          `json:"run_id,omitempty"`
	StepPath  string          `json:"step_path,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Attempts  int             `json:"attempts"`
}

// payload builds d's document from the stored approval or claim.
func (s *Service) payload(ctx context.Context, d Delivery) (*Payload, error) {
	p := &Payload{Event: d.Event, Delivery: string(d.Event) + "/" + d.Subject + "/" + d.Channel, OrganizationID: d.Org, SentAt: s.now().UTC()}
	if ok, err := s.anomalyPayload(ctx, d, p); ok {
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	if tool, key, ok := parseClaimSubject(d.Subject); ok {
		c, err := s.store.GetClaim(ctx, d.Org, tool, key)
		if errors.Is(err, toolplane.ErrNotFound) {
			return nil, fmt.Errorf("%w: claim of %s", ErrGone, tool)
		}
		if err != nil {
			return nil, err
		}
		reason, _ := boundary.RedactSecrets(c.Reason)
		p.Call = &CallContext{Tool: c.Tool, Status: string(c.Status), RunID: c.RunID, StepPath: c.StepPath, Arguments: shownJSON(c.Arguments),
			Reason: reason, Attempts: c.Attempts}
		return p, nil
	}
	a, err := s.store.GetApproval(ctx, d.Org, d.Subject)
	if errors.Is(err, toolplane.ErrNotFound) {
		return nil, fmt.Errorf("%w: approval %s", ErrGone, d.Subject)
	}
	if err != nil {
		return nil, err
	}
	shown := approval.Shown(*a)
	ac := &ApprovalContext{ID: a.ID, Status: string(a.Status), Tool: a.Tool, ToolVersion: a.ToolVersion,
		Arguments: shownJSON(shown.Arguments), Preview: shown.Preview, PrincipalID: a.PrincipalID, RunID: a.RunID,
		Rule: a.Rule, ApproverGroup: a.ApproverGroup, EscalatedFrom: a.EscalatedFrom, ExpiresAt: a.ExpiresAt.UTC(),
		ResolvedBy: a.ResolvedBy}
	ac.Reason, _ = boundary.RedactSecrets(a.Reason)
	if inv, err := approval.DecodeInvocation(a.Invocation); err == nil {
		ac.AgentID, ac.UserID = inv.AgentID, inv.UserID
	}
	p.Approval = ac
	if s.public != "" && a.Status == toolplane.ApprovalPending {
		tok, err := s.links.Sign(d.Org, a.ID, d.Channel, a.ExpiresAt)
		if err != nil {
			return nil, err
		}
		p.Link = s.public + "/console/approvals/" + urlPathEscape(a.ID) + "?link=" + tok
	}
	return p, nil
}

// shownJSON answers stored arguments as shown to a person: redacted, and
// always valid JSON.
func shownJSON(raw []byte) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	out := boundary.RedactJSON(raw)
	if !json.Valid(out) {
		b, _ := json.Marshal(string(out))
		return b
	}
	return out
}

func urlPathEscape(s string) string { return url.PathEscape(s) }

// Prune forgets used links that have expired: an expired link is refused
// by its expiry, so its nonce need not be kept.
func (s *Service) Prune(ctx context.Context) error {
	for {
		n, err := s.store.DeleteExpiredLinkNonces(ctx, s.now(), sweepBatch)
		if err != nil {
			return fmt.Errorf("prune used links: %w", err)
		}
		if n < sweepBatch {
			return nil
		}
	}
}
