package notify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/smtp"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
	"github.com/toolplane/toolplane/webhook"
)

// Send makes one attempt at delivery d, bounded by ctx and the service's
// timeout, and records it delivered when it succeeds; attempt is its
// number, from 1. An error wrapping ErrGone will not succeed later.
func (s *Service) Send(ctx context.Context, d Delivery, attempt int) error {
	ctx, cancel := context.WithTimeout(ctx, s.send.timeout)
	defer cancel()
	ch, err := s.store.GetNotificationChannel(ctx, d.Org, d.Channel)
	if errors.Is(err, toolplane.ErrNotFound) {
		return fmt.Errorf("%w: channel %s", ErrGone, d.Channel)
	}
	if err != nil {
		return fmt.Errorf("delivery on %s: %w", d.Channel, err)
	}
	p, err := s.payload(ctx, d)
	if err != nil {
		return fmt.Errorf("delivery on %s: %w", d.Channel, err)
	}
	if d.Event == ApprovalExpiring && p.Approval != nil && p.Approval.Status != string(toolplane.ApprovalPending) {
		// Answered (or expired) before the reminder fell due: nothing to
		// remind anyone of.
		return s.record(ctx, d, toolplane.DeliveryDelivered, attempt, "not sent: the approval was no longer pending")
	}
	sec, err := s.open(ch)
	if err != nil {
		return err
	}
	switch ch.Kind {
	case toolplane.ChannelWebhook:
		err = s.send.webhook(ctx, ch, sec, p)
	case toolplane.ChannelSlack:
		err = s.send.slack(ctx, ch, sec, p)
	case toolplane.ChannelEmail:
		err = s.send.email(ctx, ch, sec, p)
	default:
		err = fmt.Errorf("%w: channel kind %q", ErrGone, ch.Kind)
	}
	if err != nil {
		return fmt.Errorf("delivery on %s (%s): %w", ch.ID, ch.Kind, err)
	}
	return s.record(ctx, d, toolplane.DeliveryDelivered, attempt, "")
}

// Dead records delivery d given up after attempts, with the last error,
// in the organization's dead-letter list, and answers the delivery on the
// channel's secondary, when it names one that exists.
func (s *Service) Dead(ctx context.Context, d Delivery, attempts int, last error) (*Delivery, error) {
	if err := s.record(ctx, d, toolplane.DeliveryDead, attempts, reasonOf(last)); err != nil {
		return nil, err
	}
	ch, err := s.store.GetNotificationChannel(ctx, d.Org, d.Channel)
	if errors.Is(err, toolplane.ErrNotFound) || (err == nil && ch.Secondary == "") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secondary of %s: %w", d.Channel, err)
	}
	next := d
	next.Channel, next.At = ch.Secondary, time.Time{}
	return &next, nil
}

func (s *Service) record(ctx context.Context, d Delivery, state toolplane.DeliveryState, attempts int, msg string) error {
	// The error text is the sender's, which never quotes a secret; it is
	// bounded all the same, since an endpoint's answer is outside text.
	if len(msg) > 500 {
		msg = msg[:500]
	}
	msg = strings.ToValidUTF8(msg, "?")
	rec := &toolplane.NotificationDelivery{OrganizationID: d.Org, Event: string(d.Event), Subject: d.Subject, ChannelID: d.Channel,
		State: state, Attempts: attempts, Error: msg, UpdatedAt: s.now()}
	if err := s.store.RecordDelivery(context.WithoutCancel(ctx), rec); err != nil {
		return fmt.Errorf("record delivery on %s: %w", d.Channel, err)
	}
	return nil
}

// failure is an attempt that never reached a channel's endpoint. What
// the organization's dead-letter list keeps is reason, which is coarse:
// the destination refused by egress, or the connection failed, never
// whether it was refused, reset, timed out or failed its TLS handshake,
// which would tell the ports of an address apart and make a channel a
// port scanner. err, which the operator's log reads, says which.
type failure struct {
	reason string
	err    error
}

func (f *failure) Error() string { return f.reason + ": " + f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// The reasons a failure keeps.
const (
	reasonRefused = "destination not allowed by egress"
	reasonFailed  = "connection failed"
)

// unreached answers the failure of an attempt that did not reach its
// endpoint because of err.
func unreached(err error) error {
	var re *egress.RefusedError
	if errors.As(err, &re) {
		return &failure{reason: reasonRefused, err: err}
	}
	return &failure{reason: reasonFailed, err: err}
}

// reasonOf answers what the dead-letter list keeps of a last attempt's
// error: a failure's coarse reason, or the error's text, which is the
// sender's words or an endpoint's answer and never holds a secret.
func reasonOf(err error) string {
	var f *failure
	switch {
	case err == nil:
		return ""
	case errors.As(err, &f):
		return f.reason
	}
	return err.Error()
}

// senders hold what every attempt shares.
type senders struct {
	timeout time.Duration
	// dest is the egress policy every attempt dials through: the host
	// resolved and each of its addresses checked at every send, and the
	// checked address the one dialed, so a name that changes its answer
	// after the channel was created reaches no refused address.
	dest *egress.Policy
	// slackAPI is the base of Slack's Web API.
	slackAPI string
}

// maxAnswer bounds what is read of an endpoint's answer.
const maxAnswer = 4096

// do sends req within the senders' timeout through the destination
// policy's transport, following no redirect: a signed request, or one
// carrying a token, is for the URL configured, and a redirect could carry
// it elsewhere. Its error is the one the connection met (see unreached),
// never the URL.
func (x senders) do(req *http.Request) (*http.Response, error) {
	client := &http.Client{Transport: x.dest.Transport(), Timeout: x.timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, unreached(err)
	}
	return resp, nil
}

// post sends body to target. Its errors never name the target: a Slack
// URL is itself the credential.
func (x senders) post(ctx context.Context, target string, body []byte, header http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return errors.New("the endpoint URL is not valid")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolplane-notify")
	resp, err := x.do(req)
	if err != nil {
		return fmt.Errorf("POST: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("POST: the endpoint answered %s", resp.Status)
	}
	return nil
}

func (x senders) webhook(ctx context.Context, ch *toolplane.NotificationChannel, sec toolplane.ChannelSecrets, p *Payload) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	key := []byte(sec.HMACKey.Reveal())
	defer clear(key)
	h := webhook.Headers([][]byte{key}, p.Delivery, body, time.Now())
	h.Set(webhook.HeaderEvent, string(p.Event))
	return x.post(ctx, ch.Config.URL, body, h)
}

// slack posts p's message: through the Web API with the channel's bot
// token when it holds one, else to its incoming webhook.
func (x senders) slack(ctx context.Context, ch *toolplane.NotificationChannel, sec toolplane.ChannelSecrets, p *Payload) error {
	msg := SlackMessage(p)
	if sec.SlackBotToken != "" {
		msg["channel"] = ch.Config.SlackChannel
		_, err := x.slackCall(ctx, "chat.postMessage", sec.SlackBotToken, msg)
		return err
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return x.post(ctx, sec.SlackURL.Reveal(), body, nil)
}

// email sends p as a plain-text mail, over STARTTLS unless the channel is
// a loopback relay its operator marked insecure.
func (x senders) email(ctx context.Context, ch *toolplane.NotificationChannel, sec toolplane.ChannelSecrets, p *Payload) error {
	cfg := ch.Config
	if cfg.Insecure && !egress.LoopbackHost(cfg.Host) {
		return fmt.Errorf("%w: insecure SMTP is allowed to a loopback server only", ErrGone)
	}
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	conn, err := x.dest.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("SMTP: %w", unreached(err))
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	// Closing the connection when ctx ends unblocks any step of the
	// conversation, so a server that stops answering holds no worker.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	// Until the server has greeted and answered EHLO, what failed says
	// what listens on the port: it is kept as coarse as a failed dial.
	c, err := smtp.NewClient(conn, cfg.Host)
	if err != nil {
		return fmt.Errorf("SMTP greeting: %w", unreached(err))
	}
	defer c.Close()
	if err := c.Hello("toolplane"); err != nil {
		return fmt.Errorf("SMTP EHLO: %w", unreached(err))
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		tc := &tls.Config{ServerName: cfg.Host, MinVersion: tls.VersionTLS12}
		if cfg.CAPEM != "" {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM([]byte(cfg.CAPEM)) {
				return fmt.Errorf("%w: ca_pem holds no certificate", ErrGone)
			}
			tc.RootCAs = pool
		}
		if err := c.StartTLS(tc); err != nil {
			return fmt.Errorf("SMTP STARTTLS: %w", err)
		}
	} else if !cfg.Insecure {
		return errors.New("SMTP: the server does not offer STARTTLS, and the channel requires it")
	}
	if cfg.Username != "" {
		pw := sec.Password.Reveal()
		// smtp.PlainAuth refuses to send the password unencrypted except
		// to localhost, which is the rule wanted.
		if err := c.Auth(smtp.PlainAuth("", cfg.Username, pw, cfg.Host)); err != nil {
			return fmt.Errorf("SMTP AUTH: %w", scrub(err, pw))
		}
	}
	if err := c.Mail(cfg.From); err != nil {
		return fmt.Errorf("SMTP MAIL: %w", err)
	}
	for _, to := range cfg.To {
		if err := c.Rcpt(to); err != nil {
			return fmt.Errorf("SMTP RCPT: %w", err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("SMTP DATA: %w", err)
	}
	if _, err := w.Write(Mail(cfg.From, cfg.To, p)); err != nil {
		return fmt.Errorf("SMTP DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("SMTP DATA: %w", err)
	}
	return c.Quit()
}

// scrub answers err with the secret taken out of its text, should a
// server have echoed it.
func scrub(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), secret, "[secret]"))
}

// oneLine answers s with every control character a space.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// headerText answers s fit for a mail header: one line (CR, LF and every
// other control character replaced, so nothing from outside can add a
// header), encoded as RFC 2047 words when it is not ASCII.
func headerText(s string) string {
	s = oneLine(s)
	if len(s) > 200 {
		s = s[:200]
	}
	return mime.QEncoding.Encode("utf-8", strings.ToValidUTF8(s, "?"))
}

// Mail answers the message of p as sent: headers and a quoted-printable
// plain-text body.
func Mail(from string, to []string, p *Payload) []byte {
	var b bytes.Buffer
	b.WriteString("From: " + headerText(from) + "\r\n")
	b.WriteString("To: " + headerText(strings.Join(to, ", ")) + "\r\n")
	b.WriteString("Subject: " + headerText(title(p)) + "\r\n")
	b.WriteString("Date: " + p.SentAt.Format(time.RFC1123Z) + "\r\n")
	id := sha256.Sum256([]byte(p.Delivery))
	b.WriteString("Message-ID: <" + hex.EncodeToString(id[:16]) + "." + strconv.FormatInt(p.SentAt.UnixNano(), 36) + "@toolplane>\r\n")
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
	qp := quotedprintable.NewWriter(&b)
	for _, f := range fields(p) {
		// One line a field: text from outside neither starts a line of
		// its own nor imitates another field.
		qp.Write([]byte(f.name + ": " + oneLine(f.value) + "\r\n"))
	}
	if p.Link != "" {
		qp.Write([]byte("\r\nOpen in the console (works once): " + p.Link + "\r\n"))
	}
	qp.Close()
	return b.Bytes()
}

// title is the one-line summary of p.
func title(p *Payload) string {
	switch {
	case p.Approval != nil:
		what := map[Event]string{ApprovalFiled: "Approval needed", ApprovalEscalated: "Approval escalated to you",
			ApprovalExpiring: "Approval about to expire", ApprovalDecided: "Approval " + p.Approval.Status}[p.Event]
		return what + ": " + p.Approval.Tool
	case p.Call != nil:
		return "Call uncertain: " + p.Call.Tool
	case p.Anomaly != nil:
		return "Anomaly: " + p.Anomaly.Signal + " of " + p.Anomaly.AgentID + " on " + p.Anomaly.Tool
	}
	return string(p.Event)
}

type field struct{ name, value string }

// fields answers the lines of context a person reads.
func fields(p *Payload) []field {
	var out []field
	add := func(name, value string) {
		if value != "" {
			out = append(out, field{name, value})
		}
	}
	if a := p.Approval; a != nil {
		add("Tool", a.Tool+versionSuffix(a.ToolVersion))
		add("Status", a.Status)
		add("Arguments", string(a.Arguments))
		add("Preview", a.Preview)
		add("Agent", a.AgentID)
		add("Principal", a.PrincipalID)
		add("User", a.UserID)
		add("Run", a.RunID)
		add("Rule", a.Rule)
		add("Group", a.ApproverGroup)
		add("Expires", a.ExpiresAt.Format(time.RFC3339))
		add("Decided by", a.ResolvedBy)
		add("Reason", a.Reason)
	}
	if a := p.Anomaly; a != nil {
		add("Agent", a.AgentID)
		add("Tool", a.Tool)
		add("Signal", a.Signal)
		add("Observed", strconv.FormatFloat(a.Observed, 'f', -1, 64))
		add("Baseline", fmt.Sprintf("mean %.2f, standard deviation %.2f", a.Mean, a.StdDev))
		add("Score", fmt.Sprintf("%.1f", a.Score))
		add("Window", a.WindowStart.Format(time.RFC3339)+" to "+a.WindowEnd.Format(time.RFC3339))
	}
	if c := p.Call; c != nil {
		add("Tool", c.Tool)
		add("Status", c.Status)
		add("Run", c.RunID)
		add("Step", c.StepPath)
		add("Arguments", string(c.Arguments))
		add("Reason", c.Reason)
	}
	return out
}

func versionSuffix(v string) string {
	if v == "" {
		return ""
	}
	return "@" + v
}

// slackText escapes s for Slack's mrkdwn: &, < and > (which would open a
// link or a mention) as entities, and the backtick, which would end a
// code span, replaced by a look-alike.
func slackText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "`", "ˋ").Replace(s)
}

// SlackMessage answers the incoming-webhook message of p: a text, which
// notifications and old clients show, and blocks.
func SlackMessage(p *Payload) map[string]any {
	var lines []string
	for _, f := range fields(p) {
		lines = append(lines, "*"+f.name+":* `"+slackText(f.value)+"`")
	}
	blocks := []map[string]any{
		{"type": "header", "text": map[string]any{"type": "plain_text", "text": truncate(title(p), 150)}},
		{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": truncate(strings.Join(lines, "\n"), 3000)}},
	}
	var actions []map[string]any
	if a := p.Approval; a != nil && a.Status == string(toolplane.ApprovalPending) && p.Event != ApprovalDecided {
		// Pressed, a button is answered at the channel's interactivity
		// endpoint, which decides as the person the Slack account is
		// linked to; the value names the approval, looked up in the
		// channel's organization only.
		actions = append(actions,
			map[string]any{"type": "button", "action_id": ActionApprove, "value": a.ID, "style": "primary",
				"text": map[string]any{"type": "plain_text", "text": "Approve"}},
			map[string]any{"type": "button", "action_id": ActionReject, "value": a.ID, "style": "danger",
				"text": map[string]any{"type": "plain_text", "text": "Reject"}})
	}
	if p.Link != "" {
		actions = append(actions, map[string]any{
			"type": "button", "action_id": "toolplane_open", "text": map[string]any{"type": "plain_text", "text": "Open in the console"}, "url": p.Link,
		})
	}
	if len(actions) > 0 {
		blocks = append(blocks, map[string]any{"type": "actions", "elements": actions})
	}
	return map[string]any{"text": slackText(title(p)), "blocks": blocks}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-1]
	return strings.ToValidUTF8(s, "") + "…"
}
