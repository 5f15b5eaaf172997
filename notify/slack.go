package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
)

// The defaults of Config's Slack addresses.
const (
	DefaultSlackAPI   = "https://slack.com/api"
	DefaultSlackHooks = "https://hooks.slack.com/"
)

// The action ids of an approval message's buttons; each button's value is
// the approval's id.
const (
	ActionApprove = "toolplane_approve"
	ActionReject  = "toolplane_reject"
)

// slackID is what Slack's ids of workspaces, conversations and accounts
// look like; a conversation may also be named (#approvals).
var (
	slackID      = regexp.MustCompile(`^[A-Z0-9]{1,32}$`)
	slackChannel = regexp.MustCompile(`^(#[a-z0-9_-]{1,80}|[A-Z0-9]{1,32})$`)
	slackError   = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)
)

// checkSlack refuses a Slack channel that could not deliver: an incoming
// webhook URL, or a bot token with the conversation to post to. Its
// errors never quote a secret.
func checkSlack(n NewChannel) error {
	sec, cfg := n.Secrets, n.Config
	if cfg.URL != "" {
		return errors.New("a Slack channel's URL is a secret: give it as slack_url")
	}
	if sec.SlackBotToken != "" {
		tok := sec.SlackBotToken.Reveal()
		if len(tok) > 256 || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
			return errors.New("slack_bot_token is not a token")
		}
		if !slackChannel.MatchString(cfg.SlackChannel) {
			return errors.New("a Slack channel with a bot token needs slack_channel, the conversation's id (C0123…) or #name")
		}
	} else if err := checkURL(sec.SlackURL.Reveal()); err != nil {
		return errors.New("a Slack channel needs slack_url, an http(s) URL, or slack_bot_token")
	}
	if cfg.SlackTeam != "" && !slackID.MatchString(cfg.SlackTeam) {
		return errors.New("slack_team is not a Slack workspace id (T0123…)")
	}
	if s := sec.SlackSigningSecret.Reveal(); s != "" && (len(s) < 16 || len(s) > 256) {
		return errors.New("slack_signing_secret is not a signing secret")
	}
	return nil
}

// slackCall calls a method of Slack's Web API with the bot token and
// answers Slack's answer. Slack answers 200 to a call it refused, with ok
// false and an error code, which is what the error then says; its errors
// never hold the token.
func (x senders) slackCall(ctx context.Context, method string, token toolplane.SecretString, msg map[string]any) (map[string]any, error) {
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.slackAPI+"/"+method, bytes.NewReader(body))
	if err != nil {
		return nil, errors.New("the Slack API URL is not valid")
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+token.Reveal())
	req.Header.Set("User-Agent", "toolplane-notify")
	resp, err := x.do(req)
	if err != nil {
		return nil, fmt.Errorf("Slack %s: %w", method, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("Slack %s: answered %s", method, resp.Status)
	}
	var ans map[string]any
	if err := json.Unmarshal(raw, &ans); err != nil {
		return nil, fmt.Errorf("Slack %s: the answer is not JSON", method)
	}
	if ok, _ := ans["ok"].(bool); !ok {
		code, _ := ans["error"].(string)
		if !slackError.MatchString(code) {
			code = "unknown"
		}
		return nil, fmt.Errorf("Slack %s: refused (%s)", method, code)
	}
	return ans, nil
}

// SlackEndpoint is what a channel's interactivity endpoint verifies a
// button press with.
type SlackEndpoint struct {
	// SigningSecret is Slack's signing secret of the channel's app;
	// empty when none is configured, and then nothing is accepted.
	SigningSecret toolplane.SecretString
	// Team, when set, is the only workspace accepted.
	Team string
}

// SlackEndpoint answers the organization's Slack channel's verification
// material, or ErrNotFound when there is no such Slack channel.
func (s *Service) SlackEndpoint(ctx context.Context, org, channelID string) (*SlackEndpoint, error) {
	ch, err := s.store.GetNotificationChannel(ctx, org, channelID)
	if err != nil {
		return nil, fmt.Errorf("slack channel %s: %w", channelID, err)
	}
	if ch.Kind != toolplane.ChannelSlack {
		return nil, fmt.Errorf("slack channel %s: %w", channelID, toolplane.ErrNotFound)
	}
	sec, err := s.open(ch)
	if err != nil {
		return nil, err
	}
	return &SlackEndpoint{SigningSecret: sec.SlackSigningSecret, Team: ch.Config.SlackTeam}, nil
}

// SlackMessageRef is where the message a button was pressed on is, as
// the press told it.
type SlackMessageRef struct {
	// Conversation and TS name the message for chat.update.
	Conversation, TS string
	// ResponseURL answers the press (update the message, or tell the
	// presser alone) when there is no bot token.
	ResponseURL string
}

// SlackDecided updates the message of ref, on the organization's Slack
// channel, to say how approval a stands after a decision from Slack:
// through chat.update with the channel's bot token, else through the
// press's response_url. A decided approval's message loses its buttons;
// one still waiting for more approvers keeps them.
func (s *Service) SlackDecided(ctx context.Context, org, channelID string, ref SlackMessageRef, a *toolplane.Approval) error {
	ctx, cancel := context.WithTimeout(ctx, s.send.timeout)
	defer cancel()
	ch, err := s.store.GetNotificationChannel(ctx, org, channelID)
	if err != nil {
		return fmt.Errorf("slack channel %s: %w", channelID, err)
	}
	ev := ApprovalDecided
	if a.Status == toolplane.ApprovalPending {
		ev = ApprovalFiled
	}
	p, err := s.payload(ctx, Delivery{Org: org, Event: ev, Subject: a.ID, Channel: channelID})
	if err != nil {
		return err
	}
	msg := SlackMessage(p)
	blocks := msg["blocks"].([]map[string]any)
	msg["blocks"] = append(blocks, map[string]any{"type": "context", "elements": []map[string]any{
		{"type": "mrkdwn", "text": truncate(decidedLine(a, s.now()), 3000)}}})
	sec, err := s.open(ch)
	if err != nil {
		return err
	}
	if sec.SlackBotToken != "" && ref.Conversation != "" && ref.TS != "" {
		msg["channel"], msg["ts"] = ref.Conversation, ref.TS
		_, err := s.send.slackCall(ctx, "chat.update", sec.SlackBotToken, msg)
		return err
	}
	msg["replace_original"] = true
	return s.respond(ctx, ref.ResponseURL, msg)
}

// decidedLine says who decided a and when, as shown under its message.
func decidedLine(a *toolplane.Approval, now time.Time) string {
	if a.Status == toolplane.ApprovalPending {
		return "Approved from Slack by `" + slackText(strings.Join(a.ApprovedBy, "`, `")) + "` (" +
			strconv.Itoa(len(a.ApprovedBy)) + " of " + strconv.Itoa(a.Approvers) + "); waiting for more approvers"
	}
	at := a.ResolvedAt
	if at.IsZero() {
		at = now
	}
	return "*" + slackText(string(a.Status)) + "* from Slack by `" + slackText(a.ResolvedBy) + "` at " + at.UTC().Format(time.RFC3339)
}

// SlackAnswer tells the person who pressed a button, alone, text: through
// the press's response_url, as an ephemeral message that leaves the
// original alone.
func (s *Service) SlackAnswer(ctx context.Context, responseURL, text string) error {
	ctx, cancel := context.WithTimeout(ctx, s.send.timeout)
	defer cancel()
	return s.respond(ctx, responseURL, map[string]any{"response_type": "ephemeral", "replace_original": false, "text": text})
}

// respond posts msg to a press's response_url, which must be under
// Config.SlackHooks: the press is signed by Slack, but its URL is only
// ever answered at Slack's own address.
func (s *Service) respond(ctx context.Context, responseURL string, msg map[string]any) error {
	u, err := url.Parse(responseURL)
	if err != nil || u.User != nil || u.Fragment != "" || !strings.HasPrefix(u.String(), s.slackHooks) || responseURL != u.String() {
		return fmt.Errorf("%w: the press's response_url is not Slack's", toolplane.ErrInvalid)
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return s.send.post(ctx, responseURL, body, nil)
}
