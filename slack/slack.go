// Package slack decides approvals from Slack: the Approve and Reject
// buttons of an approval message (package notify sends them) are
// answered here, at a Slack channel's interactivity endpoint.
//
// # A press
//
// Slack POSTs a press to /slack/interactivity/{organization}/{channel},
// the URL an organization's Slack app is configured with. The request is
// refused (and nothing decided) unless it is signed the way Slack signs
// requests, with the channel's signing secret: X-Slack-Signature is "v0="
// and the hex HMAC-SHA256 of "v0:{X-Slack-Request-Timestamp}:{body}",
// compared in constant time; the timestamp is within five minutes of the
// server's clock; the same signature was not accepted before (a replay);
// and the body is at most MaxBody bytes. A channel configured with a
// workspace (slack_team) accepts that workspace's presses only.
//
// The button's value names the approval, which is looked up in the
// channel's organization only: a workspace configured for one
// organization can never reach another's approval.
//
// # Who decides
//
// A Slack account decides as the toolplane person it is linked to
// (toolplane.SlackLink), with that person's own credential as it stands
// at the press: the decision is the console's call (invoke.Invoker's
// Resolve), so the approval service applies the same rules (the approver
// role, the approval's group, four eyes, expiry). An account that is not
// linked decides nothing: it is told, in a message only it sees, how to
// link itself. The person runs `toolplane slack link CODE` with their own
// person key within CodeTTL; the code is signed, binds the organization,
// workspace and account it was shown to, and works once. Nobody links an
// account to someone else.
package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/secret"
)

// Route is the interactivity endpoint's pattern.
const Route = "POST /slack/interactivity/{org}/{channel}"

// MaxBody bounds a press's body: Slack's payload of one of toolplane's
// messages is a few kilobytes.
const MaxBody = 64 << 10

// MaxSkew is how far a press's timestamp may be from the server's clock.
const MaxSkew = 5 * time.Minute

// Errors a press is refused with before anything is looked at.
var (
	ErrSignature = toolplane.Refine(toolplane.ErrUnauthenticated, "slack request signature not valid")
	ErrStale     = toolplane.Refine(toolplane.ErrUnauthenticated, "slack request timestamp too old or too new")
	ErrReplay    = toolplane.Refine(toolplane.ErrUnauthenticated, "slack request seen before")
	ErrNotLinker = toolplane.Refine(toolplane.ErrForbidden, "not allowed to manage slack links")
)

// Verify checks a request Slack signed: sig is X-Slack-Signature, ts
// X-Slack-Request-Timestamp, body the raw body, signing the secret.
func Verify(signing toolplane.SecretString, ts, sig string, body []byte, now time.Time) error {
	sec := signing.Reveal()
	if sec == "" {
		return ErrSignature
	}
	if err := precheck(ts, sig, now); err != nil {
		return err
	}
	m := hmac.New(sha256.New, []byte(sec))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	want := "v0=" + hex.EncodeToString(m.Sum(nil))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return ErrSignature
	}
	return nil
}

// precheck refuses a press whose timestamp is out of the window or whose
// signature is not shaped as Slack's: "v0=" and 64 hex digits.
func precheck(ts, sig string, now time.Time) error {
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrStale
	}
	if d := now.Sub(time.Unix(n, 0)); d > MaxSkew || d < -MaxSkew {
		return ErrStale
	}
	if len(sig) != len("v0=")+2*sha256.Size || sig[:3] != "v0=" {
		return ErrSignature
	}
	return nil
}

// Decider records a person's answer to an approval: the console's call,
// *invoke.Invoker's Resolve.
type Decider interface {
	Resolve(ctx context.Context, id string, d approval.Decision, by *toolplane.Credential) (*toolplane.Approval, error)
}

// Channels is what the notification service answers of a Slack channel.
type Channels interface {
	SlackEndpoint(ctx context.Context, org, channelID string) (*notify.SlackEndpoint, error)
	SlackDecided(ctx context.Context, org, channelID string, ref notify.SlackMessageRef, a *toolplane.Approval) error
	SlackAnswer(ctx context.Context, responseURL, text string) error
}

// Store keeps links, finds credentials and remembers what was used once.
type Store interface {
	toolplane.SlackLinkStore
	apikey.Getter
	UseLinkNonce(ctx context.Context, org, nonce string, expires time.Time) error
}

// Config is what a Service is built from; every field but Now and Logger
// is required.
type Config struct {
	Store    Store
	Keys     *secret.Keyring
	Channels Channels
	Decider  Decider
	Now      func() time.Time
	Logger   *slog.Logger
}

// Service answers presses and keeps links.
type Service struct {
	cfg Config
	log *slog.Logger
	// replies are the answers and message updates sent to Slack after a
	// press was answered (see later).
	replies sync.WaitGroup

	// window counts this second's requests that reached the channel's
	// secret, by organization and channel and in all (see admit).
	mu     sync.Mutex
	second int64
	counts map[string]int
	total  int
}

// The requests a second that may read a channel's signing secret: people
// press buttons a few times a minute, and a flood of well-formed forged
// presses must not turn into as many store reads.
const (
	PerChannelPerSecond = 20
	PerSecond           = 500
)

// admit counts a request for org's channel in this second's window and
// reports whether it is within the bounds.
func (s *Service) admit(org, channel string) bool {
	now := s.cfg.Now().Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now != s.second || s.counts == nil {
		s.second, s.counts, s.total = now, map[string]int{}, 0
	}
	k := org + "\x00" + channel
	if s.total >= PerSecond || s.counts[k] >= PerChannelPerSecond {
		return false
	}
	s.total++
	s.counts[k]++
	return true
}

// later sends a reply to Slack after the press's own answer: Slack wants
// that answer within 3 seconds, and a reply through its API may take
// longer. The decision is made before the answer; only what Slack is
// told of it follows.
func (s *Service) later(ctx context.Context, send func(context.Context)) {
	ctx = context.WithoutCancel(ctx)
	s.replies.Go(func() { send(ctx) })
}

// Wait waits for the replies to Slack still being sent, each bounded by
// its request's timeout: a test reads what they sent. A reply a stopping
// node never sent leaves the decision made and the message as it was.
func (s *Service) Wait() { s.replies.Wait() }

// New answers the service cfg describes.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Keys == nil || cfg.Channels == nil || cfg.Decider == nil {
		return nil, fmt.Errorf("%w: slack needs a store, a keyring, the channels and a decider", toolplane.ErrInvalid)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, log: cfg.Logger}, nil
}

// Handler answers Route.
func (s *Service) Handler() http.Handler { return http.HandlerFunc(s.interact) }

// The answers a presser alone is shown.
const (
	answerNotFound  = "toolplane has no such approval in this organization; nothing was decided."
	answerAnswered  = "This approval was answered already, or expired; nothing was decided."
	answerFailed    = "toolplane could not record the answer; nothing was decided. Try again, or answer in the console."
	answerBadLink   = "Your Slack account's link to toolplane no longer works (its key was revoked or expired), so nothing was decided. "
	answerUnlinked  = "Your Slack account is not linked to a toolplane person, so nothing was decided. "
	answerElsewhere = "Your Slack account is linked to a toolplane person through another of the organization's Slack apps, not this one, so nothing was decided. "
)

func (s *Service) interact(w http.ResponseWriter, r *http.Request) {
	ctx, org, channel := r.Context(), r.PathValue("org"), r.PathValue("channel")
	if toolplane.CheckLen("org", org, toolplane.MaxRefLen) != nil || toolplane.CheckLen("channel", channel, toolplane.MaxRefLen) != nil {
		httperr.Send(w, r, httperr.CodeFor(http.StatusNotFound), "no such endpoint", "")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			httperr.Send(w, r, httperr.CodeFor(http.StatusRequestEntityTooLarge), "the request is too large", "")
			return
		}
		httperr.Send(w, r, httperr.CodeFor(http.StatusBadRequest), "the request could not be read", "")
		return
	}
	now := s.cfg.Now()
	ts, sig := r.Header.Get("X-Slack-Request-Timestamp"), r.Header.Get("X-Slack-Signature")
	// What needs no secret is checked before the channel is read and its
	// secret opened, so a flood of unsigned requests costs no store read.
	if err := precheck(ts, sig, now); err != nil {
		httperr.Send(w, r, httperr.CodeFor(http.StatusUnauthorized), err.Error(), "")
		return
	}
	if !s.admit(org, channel) {
		w.Header().Set("Retry-After", "1")
		httperr.Send(w, r, httperr.RateLimited, "too many requests for this channel; try again in a second", "")
		return
	}
	ep, err := s.cfg.Channels.SlackEndpoint(ctx, org, channel)
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		// Said as a bad signature: whether a channel exists is not told
		// to whoever cannot sign for it.
		ep = &notify.SlackEndpoint{}
	case err != nil:
		httperr.Fail(w, r, s.log, err)
		return
	}
	if err := Verify(ep.SigningSecret, ts, sig, body, now); err != nil {
		s.log.WarnContext(ctx, "slack press refused", "org", org, "channel", channel, "why", err.Error())
		httperr.Send(w, r, httperr.CodeFor(http.StatusUnauthorized), err.Error(), "")
		return
	}
	// A signature accepted once is never accepted again: a captured
	// press replayed within the timestamp's window decides nothing.
	// Keyed by the signature alone: one press is one decision, whichever
	// of the organization's channels it is sent to.
	if err := s.cfg.Store.UseLinkNonce(ctx, org, "slack-press:"+sig, now.Add(2*MaxSkew)); errors.Is(err, toolplane.ErrExists) {
		s.log.WarnContext(ctx, "slack press refused", "org", org, "channel", channel, "why", ErrReplay.Error())
		httperr.Send(w, r, httperr.CodeFor(http.StatusUnauthorized), ErrReplay.Error(), "")
		return
	} else if err != nil {
		httperr.Fail(w, r, s.log, err)
		return
	}
	p, err := ParseForm(body)
	if err != nil {
		httperr.Send(w, r, httperr.CodeFor(http.StatusBadRequest), err.Error(), "")
		return
	}
	if !p.Button {
		w.WriteHeader(http.StatusOK) // another button (the console link): nothing to do
		return
	}
	if ep.Team != "" && p.Team != ep.Team {
		s.log.WarnContext(ctx, "slack press refused", "org", org, "channel", channel, "team", p.Team, "why", "another workspace")
		httperr.Send(w, r, httperr.CodeFor(http.StatusForbidden), "this channel accepts presses of its own workspace only", "")
		return
	}
	s.press(ctx, org, channel, p)
	w.WriteHeader(http.StatusOK)
}

// press decides p as the person its Slack account is linked to, and
// answers the presser through Slack.
func (s *Service) press(ctx context.Context, org, channel string, p *Press) {
	log := s.log.With("org", org, "channel", channel, "team", p.Team, "user", p.User, "approval", p.Approval)
	answer := func(text string) {
		s.later(ctx, func(ctx context.Context) {
			if err := s.cfg.Channels.SlackAnswer(ctx, p.ResponseURL, text); err != nil {
				log.WarnContext(ctx, "slack answer not sent", "err", err)
			}
		})
	}
	cred, why, err := s.person(ctx, org, channel, p)
	if err != nil {
		log.ErrorContext(ctx, "slack press not decided", "err", err)
		answer(answerFailed)
		return
	}
	if cred == nil {
		log.InfoContext(ctx, "slack press from an account not linked", "why", why)
		c, err := signCode(s.cfg.Keys, org, channel, p.Team, p.User, s.cfg.Now())
		if err != nil {
			log.ErrorContext(ctx, "slack link code not signed", "err", err)
			answer(answerFailed)
			return
		}
		answer(why + "To link it to yourself, run within 10 minutes, with your own person key: `toolplane slack link " + c + "`")
		return
	}
	// A button carries no reason; where the answer came from is what a
	// reader of the approval, its audit event and the console is told
	// instead, so a decision from Slack is never mistaken for one made
	// in the console with the same key.
	a, err := s.cfg.Decider.Resolve(ctx, p.Approval, approval.Decision{Approve: p.Approve, Reason: Reason(p.Team, p.User)}, cred)
	switch {
	case err == nil:
		log.InfoContext(ctx, "approval answered from slack", "person", cred.Subject, "status", string(a.Status))
		s.later(ctx, func(ctx context.Context) {
			if err := s.cfg.Channels.SlackDecided(ctx, org, channel,
				notify.SlackMessageRef{Conversation: p.Conversation, TS: p.TS, ResponseURL: p.ResponseURL}, a); err != nil {
				log.WarnContext(ctx, "slack message not updated", "err", err)
			}
		})
		return
	case errors.Is(err, toolplane.ErrNotFound):
		answer(answerNotFound)
	case errors.Is(err, approval.ErrNotPending), errors.Is(err, approval.ErrExpired):
		answer(answerAnswered)
	case errors.Is(err, toolplane.ErrForbidden), errors.Is(err, toolplane.ErrConflict), errors.Is(err, toolplane.ErrInvalid):
		// The service's refusal is the person's to read, as the console
		// shows it: why they may not answer, never another's data.
		answer("toolplane refused: " + clip(err.Error()) + ". Nothing was decided.")
	default:
		log.ErrorContext(ctx, "slack press not decided", "err", err)
		answer(answerFailed)
		return
	}
	log.InfoContext(ctx, "slack press refused", "person", cred.Subject, "err", err)
}

// person answers the credential p's Slack account decides with through
// channel, or nil and why there is none. A link made through another
// channel (another Slack app) decides nothing here: whoever holds this
// channel's signing secret could otherwise sign a press as any account
// linked through any app of the organization.
func (s *Service) person(ctx context.Context, org, channel string, p *Press) (*toolplane.Credential, string, error) {
	l, err := s.cfg.Store.GetSlackLink(ctx, org, p.Team, p.User)
	if errors.Is(err, toolplane.ErrNotFound) {
		return nil, answerUnlinked, nil
	}
	if err == nil && l.Channel != channel {
		return nil, answerElsewhere, nil
	}
	if err != nil {
		return nil, "", err
	}
	cred, err := apikey.InForce(ctx, s.cfg.Store, l.CredentialID, s.cfg.Now())
	if errors.Is(err, apikey.ErrInvalid) || (err == nil && (cred.Kind != toolplane.CredentialPerson || cred.OrganizationID != org)) {
		return nil, answerBadLink, nil
	}
	if err != nil {
		return nil, "", err
	}
	return cred, "", nil
}

// Reason is the reason a decision from Slack is recorded with: that it
// was a button pressed in Slack, and by which account of which
// workspace.
func Reason(team, user string) string {
	return "answered in Slack by account " + user + " of workspace " + team
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300]
	}
	return s
}

// Link links the Slack account a code was shown to, to by: a person's
// stored credential of the code's organization, which the account then
// decides with. The code works once.
func (s *Service) Link(ctx context.Context, codeText string, by *toolplane.Credential) (*toolplane.SlackLink, error) {
	if by == nil || by.Kind != toolplane.CredentialPerson {
		return nil, toolplane.Refuse(by, ErrNotLinker, "linking a Slack account needs your own person key")
	}
	now := s.cfg.Now()
	c, err := parseCode(s.cfg.Keys, codeText, now)
	if err != nil {
		return nil, err
	}
	if c.Org != by.OrganizationID {
		return nil, ErrCode
	}
	// The account decides with this very credential, read again at each
	// press: one the store does not keep (a token's) could not be.
	if stored, err := apikey.InForce(ctx, s.cfg.Store, by.ID, now); err != nil || stored.Kind != toolplane.CredentialPerson ||
		stored.Subject != by.Subject || stored.OrganizationID != by.OrganizationID {
		return nil, toolplane.Refuse(by, ErrNotLinker, "linking a Slack account needs a person API key (a key toolplane issued)")
	}
	if err := s.cfg.Store.UseLinkNonce(ctx, c.Org, "slack-link:"+c.Nonce, time.Unix(c.Expires, 0)); errors.Is(err, toolplane.ErrExists) {
		return nil, ErrCode
	} else if err != nil {
		return nil, fmt.Errorf("link slack account: %w", err)
	}
	l := &toolplane.SlackLink{OrganizationID: c.Org, Team: c.Team, User: c.User, CredentialID: by.ID, Subject: by.Subject, Channel: c.Channel, CreatedAt: now}
	ev := toolplane.ControlEvent(by, toolplane.AuditSlack, "linked", c.Team+"/"+c.User, now)
	ev.Reason = "the Slack account decides approvals as " + by.Subject + ", with key " + by.ID + ", through notification channel " + c.Channel
	if err := s.cfg.Store.PutSlackLink(ctx, l, ev); err != nil {
		return nil, fmt.Errorf("link slack account: %w", err)
	}
	s.log.InfoContext(ctx, "slack account linked", "org", c.Org, "channel", c.Channel, "team", c.Team, "user", c.User, "person", by.Subject)
	return l, nil
}

// Links answers the links of by's organization: every one to a platform
// administrator, a person's own otherwise.
func (s *Service) Links(ctx context.Context, by *toolplane.Credential) ([]toolplane.SlackLink, error) {
	if by == nil || by.Kind != toolplane.CredentialPerson {
		return nil, toolplane.Refuse(by, ErrNotLinker, "Slack links are a person's")
	}
	ls, err := s.cfg.Store.ListSlackLinks(ctx, by.OrganizationID)
	if err != nil {
		return nil, fmt.Errorf("slack links: %w", err)
	}
	out := []toolplane.SlackLink{}
	for _, l := range ls {
		if by.HasAnyRole(toolplane.RolePlatformAdmin) || l.Subject == by.Subject {
			out = append(out, l)
		}
	}
	return out, nil
}

// Unlink removes the link of the Slack account (team, user) in by's
// organization: by's own, or any for a platform administrator.
func (s *Service) Unlink(ctx context.Context, team, user string, by *toolplane.Credential) error {
	if by == nil || by.Kind != toolplane.CredentialPerson {
		return toolplane.Refuse(by, ErrNotLinker, "Slack links are a person's")
	}
	l, err := s.cfg.Store.GetSlackLink(ctx, by.OrganizationID, team, user)
	if err != nil {
		return fmt.Errorf("slack link %s/%s: %w", team, user, err)
	}
	if l.Subject != by.Subject && !by.HasAnyRole(toolplane.RolePlatformAdmin) {
		// Another person's link is not told to exist.
		return fmt.Errorf("slack link %s/%s: %w", team, user, toolplane.ErrNotFound)
	}
	ev := toolplane.ControlEvent(by, toolplane.AuditSlack, "unlinked", team+"/"+user, s.cfg.Now())
	ev.Reason = "the Slack account no longer decides approvals as " + l.Subject
	if _, err := s.cfg.Store.DeleteSlackLink(ctx, by.OrganizationID, team, user, ev); err != nil {
		return fmt.Errorf("slack link %s/%s: %w", team, user, err)
	}
	return nil
}
