// Package httpruntime is the http runtime: a tool whose definition binds an
// HTTP request (binding.http) is answered by one request the platform
// makes itself, through the connection the broker released for the call.
//
// Arguments reach the request only encoded: a path placeholder becomes one
// percent-encoded segment, a query or header value an encoded value, the
// body JSON. A value that cannot be encoded so (an object in the path, a
// line break in a header) is refused as invalid input naming the argument,
// and nothing is sent.
//
// How a call ends follows from what the downstream can have done:
//
//	2xx                    the answer (a body that is not JSON answers its
//	                       text, which an object output schema refuses as
//	                       invalid_output: the claim completes)
//	400, 422, other 4xx    invalid_input        definite
//	404, 410               not_found            definite
//	409, 412               conflict             definite
//	401, 403               unavailable, naming the connection; released
//	408, 429               retryable_upstream; released
//	501, 505               unavailable; released
//	5xx, a lost answer     a read: retryable_upstream; a write:
//	                       uncertain (held)
//	not sent at all        unavailable; released
//	refused by egress      unavailable, saying only that the destination
//	                       is not allowed (the host and rule go to the
//	                       operator's log and the audit event); released.
//	                       A write's redirect refused: uncertain (held)
//	a body past the cap    a read: unavailable, stating the cap; a write:
//	                       uncertain (held: it acted, and its answer is
//	                       unread, so it must not run again)
//
// Each Invoke sends the request once. The endings another attempt may
// change (408, 429, a 5xx other than 501 and 505, a lost answer) are
// marked transient, with the downstream's Retry-After, and the invoker's
// one retry loop decides whether to send again (see package invoke): a
// read whose definition says retry: safe, within its deadline. A write is
// sent again only when its binding names an idempotency_header: a digest
// of the call's idempotency key (DownstreamKey) then goes in that header
// on every attempt, the downstream recognises a repeat, and the binding
// says so (handler.WithKeyedDownstream); an answer the downstream finally
// gives (2xx or a definite 4xx) ends the call, and one it never gives
// leaves it uncertain.
//
// Every upstream text a model may read (an error's message, a body) is
// bounded, stripped of the released secret values, and, being the
// downstream's, labelled untrusted by the invoker.
package httpruntime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/tracectx"
)

// Config wires a Runtime.
type Config struct {
	// Client answers the HTTP client a call through rel's connection
	// uses. The deployment's client enforces the connection's egress
	// rules when it dials and on every redirect; the runtime adds no
	// rules of its own. Required.
	Client func(rel *toolplane.Released) (*http.Client, error)
	// Now is the clock Retry-After dates are read against; nil is
	// time.Now. Deadlines are the context's.
	Now func() time.Time
}

// Runtime builds the bindings of HTTP tools.
type Runtime struct {
	cfg Config
}

// New answers a runtime.
func New(cfg Config) *Runtime {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Runtime{cfg: cfg}
}

// Key answers the handler key of d's binding.
func Key(d *toolplane.Definition) string { return "http:" + d.Name + "@" + d.Version }

// Bind builds the binding that answers d with its HTTP request. It
// compiles d's request once, checking it as Check does; the caller keeps
// the binding for as long as the definition stands. An error wraps
// toolplane.ErrInvalid when d does not pass Check.
func (r *Runtime) Bind(d *toolplane.Definition) (*handler.Binding, error) {
	if r.cfg.Client == nil {
		return nil, fmt.Errorf("http runtime: no client is configured for %s@%s", d.Name, d.Version)
	}
	p, ps := compile(d)
	if len(ps) > 0 {
		msgs := make([]string, len(ps))
		for i, pr := range ps {
			msgs[i] = pr.String()
		}
		return nil, fmt.Errorf("http runtime: %w: %s@%s: %s", toolplane.ErrInvalid, d.Name, d.Version, strings.Join(msgs, "; "))
	}
	c := &caller{cfg: &r.cfg, plan: p}
	return handler.BindFunc(Key(d), c.call, nil, bindingOptions(d, p)...)
}

// Target answers the downstream d's request reaches, which its breaker
// and in-flight cap are kept for: the host of an absolute URL, or, for a
// path sent under the base URL of the connection a call goes through, the
// connection provider (whose base URL is known only once a connection is
// released, after the breaker is asked).
func Target(d *toolplane.Definition) string {
	h := d.Binding.HTTP
	if h == nil || toolplane.RelativeURL(h.URL) {
		return "connection:" + d.Connection
	}
	if u, err := url.Parse(h.URL); err == nil && u.Host != "" {
		return "host:" + u.Host
	}
	return Key(d)
}

// bindingOptions answers the options of d's binding.
func bindingOptions(d *toolplane.Definition, p *plan) []handler.Option {
	opts := []handler.Option{handler.WithContextBound(), handler.WithTarget(Target(d))}
	if p.writes && p.idempotent != "" {
		// Every attempt carries the call's key, which the downstream
		// reads to tell a repeat from a new request.
		opts = append(opts, handler.WithKeyedDownstream())
	}
	return opts
}

// Contract answers the runtime's contract: Checks, binding with r.
func (r *Runtime) Contract() handler.Runtime { return Checks().BindWith(r.Bind) }

// The values of the headers every call sends, shared by all calls:
// net/http reads a request's header values and never writes them.
var (
	userAgent = []string{"toolplane"}
	jsonType  = []string{"application/json"}
	// streamTypes is the Accept of a streamed call (see passThrough).
	streamTypes = []string{"application/json, text/event-stream;q=0.9"}
)

// caller runs one binding's calls.
type caller struct {
	cfg  *Config
	plan *plan
}

// Bounds of what an attempt reads.
const (
	// maxRetryAfter caps the Retry-After read: a longer one is passed on
	// as this.
	maxRetryAfter = 24 * time.Hour
	// errorBodyBytes bounds what is read of a failure's body: its message
	// is bounded again before a model reads it.
	errorBodyBytes = 4 << 10
	// maxQuoted bounds the upstream's message inside the runtime's own.
	maxQuoted = 512
)

// baseOf answers the base URL of connection con, which a tool whose URL
// is a path is sent under. The connection checked it when it was made.
func baseOf(con *toolplane.Connection) (*url.URL, error) {
	if con.Config.BaseURL == "" {
		return nil, fmt.Errorf("connection %s has no base_url, which this tool's URL (a path) is sent under; an administrator must give it one", con.ID)
	}
	u, err := url.Parse(con.Config.BaseURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("connection %s has a base_url that is not an absolute URL", con.ID)
	}
	return u, nil
}

// call is the handler body: build the request, send it once, and read
// the answer (the invoker decides whether another attempt is made).
func (c *caller) call(ctx context.Context, call handler.Call, args any) (any, error) {
	var err error
	rel := call.Released
	if rel == nil || rel.Connection == nil {
		return nil, errors.New("http runtime: no connection was released for the call")
	}
	var base *url.URL
	if c.plan.target.relative() {
		if base, err = baseOf(rel.Connection); err != nil {
			return nil, handler.Explain(toolplane.CodeUnavailable, err.Error()+"; nothing was sent").Err()
		}
	}
	b, err := c.plan.build(args, base)
	if err != nil {
		return nil, err
	}
	s := &b.scrub
	s.fill(rel)
	authName, authValue, err := credential(rel)
	if err != nil {
		return nil, handler.Explain(toolplane.CodeUnavailable, err.Error()+"; nothing was sent").Err()
	}
	client, err := c.cfg.Client(rel)
	if err != nil {
		return nil, handler.Explain(toolplane.CodeUnavailable, s.scrub(fmt.Sprintf("connection %s cannot be used now: %v; nothing was sent", rel.Connection.ID, err))).Err()
	}
	b.header["User-Agent"] = userAgent
	b.header["Accept"] = jsonType
	if handler.Streaming(ctx) {
		// The caller reads the call's stream: a downstream that can
		// answer in pieces may.
		b.header["Accept"] = streamTypes
	}
	if b.body != nil && b.header.Get("Content-Type") == "" {
		b.header["Content-Type"] = jsonType
	}
	if c.plan.idempotent != "" {
		// The key is what makes a second attempt safe: without one the
		// request is not sent at all.
		if call.Key == "" || strings.ContainsFunc(call.Key, control) {
			return nil, errors.New("http runtime: the call has no idempotency key that can be sent in a header")
		}
		b.header.Set(c.plan.idempotent, DownstreamKey(call.Key))
	}
	// credential answers the header's name canonical, as Set would make
	// it.
	b.auth[0] = authValue
	b.header[authName] = b.auth[:]

	x := c.send(ctx, client, b, s)
	v := c.judge(ctx, x, rel, s)
	// What the verdict holds of the body is copied out of it.
	x.release()
	return v.out, v.err
}

// exchange is one attempt: what came back, or why nothing did.
type exchange struct {
	status int
	header http.Header
	body   []byte
	// over: the body ran past the cap and was not read whole.
	over bool
	err  error
	// sent: the request was written, in part or whole, so the downstream
	// may have acted on it.
	sent bool
	// buf is the pooled buffer body was read into, if any.
	buf *[]byte
}

// sending is what one attempt's send keeps on the heap, in one
// allocation rather than one each: whether net/http wrote the request
// (its trace's hook sets it, possibly from the transport's goroutine),
// the trace, and the exchange the attempt answers.
type sending struct {
	wrote atomic.Bool
	trace httptrace.ClientTrace
	x     exchange
}

// bodyBufs are the buffers answers are read into, pooled: an answer is
// decoded (or quoted) into values of its own, and its bytes are not
// needed once the attempt is judged.
var bodyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// keptBody bounds a buffer pooled again: one grown by a rare large
// answer is left to the collector rather than kept.
const keptBody = 64 << 10

// read reads r to its end, or to limit bytes, into a pooled buffer, as
// io.ReadAll of an io.LimitReader would.
func (x *exchange) read(r io.Reader, limit int) {
	x.buf = bodyBufs.Get().(*[]byte)
	b := (*x.buf)[:0]
	for len(b) < limit {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):min(cap(b), limit)])
		b = b[:len(b)+n]
		if err != nil {
			if err != io.EOF {
				x.err = err
			}
			break
		}
	}
	*x.buf, x.body = b, b
}

// release gives the buffer the body was read into back, once nothing
// reads the body any more.
func (x *exchange) release() {
	if x.buf == nil {
		return
	}
	if cap(*x.buf) <= keptBody {
		*x.buf = (*x.buf)[:0]
		bodyBufs.Put(x.buf)
	}
	x.buf, x.body = nil, nil
}

// send makes one attempt.
func (c *caller) send(ctx context.Context, client *http.Client, b *built, s *scrubber) *exchange {
	sd := &sending{}
	// Called once the request is written or its writing failed: either
	// way bytes may have left, and the downstream may act.
	sd.trace.WroteRequest = func(httptrace.WroteRequestInfo) { sd.wrote.Store(true) }
	tctx := httptrace.WithClientTrace(ctx, &sd.trace)
	if strings.HasSuffix(b.url.Host, ":") {
		// Read back from its text, the URL would lose its empty port
		// and name another host than the binding's.
		return &exchange{err: fmt.Errorf("the request's host %q is not the binding's", strings.TrimSuffix(b.url.Host, ":"))}
	}
	// The request is made from the URL build made, as
	// http.NewRequestWithContext would make it from that URL's text,
	// without writing the text out and parsing it back.
	// Host is left empty: net/http then takes the URL's, which
	// NewRequestWithContext would have copied there, and a Host of its
	// own makes Client.Do copy the URL for the cookie jar on every call.
	r := http.Request{
		Method: c.plan.method, URL: b.url,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		// The header built for the call is sent as it is, by every
		// attempt: nothing writes to it once the call sends, since
		// net/http writes into a request's own header only to add a
		// cookie jar's cookies (a redirect gets a copy of its own).
		Header: b.header,
	}
	if client.Jar != nil {
		// A copy per attempt, so one attempt's cookies are not sent
		// again by the next.
		r.Header = b.header.Clone()
	}
	// The attempt's W3C trace context (its span's, or the caller's passed
	// through), over any the binding's headers set: the downstream's
	// spans continue the call's trace, never one an argument named.
	tracectx.ToHeader(ctx, r.Header)
	if b.body != nil {
		body := b.body
		r.ContentLength = int64(len(body))
		r.Body = io.NopCloser(bytes.NewReader(body))
		// A redirect that keeps the body (307, 308) sends it again.
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		if len(body) == 0 {
			r.Body = http.NoBody
			r.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
		}
	}
	req := r.WithContext(tctx)
	resp, err := client.Do(req)
	if err != nil {
		sd.x = exchange{err: err, sent: sd.wrote.Load()}
		return &sd.x
	}
	defer resp.Body.Close()
	x := &sd.x
	*x = exchange{status: resp.StatusCode, header: resp.Header, sent: true}
	limit := c.plan.maxBytes
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		limit = errorBodyBytes
	}
	var body io.Reader = resp.Body
	if p := passThrough(ctx, resp, s); p != nil {
		// The answer streams: its pieces reach the call's stream as
		// they arrive, while the whole is read as the answer, as ever.
		body = io.TeeReader(resp.Body, p)
		defer p.end()
	}
	x.read(body, limit+1)
	if len(x.body) > limit {
		x.body, x.over = x.body[:limit], true
	}
	return x
}

// verdict is what an attempt decides: the answer, or the error whose
// ending (and, for a transient one, whose Retry-After) the invoker reads.
type verdict struct {
	out any
	err error
}

// judge decides what an attempt means for the call.
func (c *caller) judge(ctx context.Context, x *exchange, rel *toolplane.Released, s *scrubber) verdict {
	p := c.plan
	if x.status == 0 {
		return c.failed(ctx, x, s)
	}
	code := x.status
	switch {
	case code >= 200 && code <= 299:
		switch {
		case x.err != nil:
			return c.lost(ctx, s.scrub(fmt.Sprintf("the downstream answered HTTP %d and its body was lost: %v", code, x.err)))
		case x.over && p.writes:
			// The downstream acted; its answer is unread. Holding the
			// claim keeps the write from running again while a person
			// settles what it answered.
			return verdict{err: handler.Uncertain(fmt.Sprintf("the downstream took the request (HTTP %d), but its answer is larger than the %d-byte cap and was not read", code, p.maxBytes)).Err()}
		case x.over:
			return verdict{err: handler.Explain(toolplane.CodeUnavailable, fmt.Sprintf("the downstream's answer is larger than the %d-byte cap of this tool and was not read", p.maxBytes)).Err()}
		}
		return verdict{out: c.answer(ctx, x, s)}
	}
	// A refusal whose body was cut short is still a refusal: its message
	// is what arrived.
	msg := s.scrub(upstreamMessage(x.body))
	said := fmt.Sprintf("the downstream answered HTTP %d", code)
	if msg != "" {
		said += ": " + msg
	}
	switch code {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return verdict{err: &handler.Invalid{Message: said}}
	case http.StatusNotFound, http.StatusGone:
		return verdict{err: &handler.NotFound{Message: said}}
	case http.StatusConflict, http.StatusPreconditionFailed:
		return verdict{err: &handler.Conflict{Message: said}}
	case http.StatusUnauthorized, http.StatusForbidden:
		return verdict{err: handler.Explain(toolplane.CodeUnavailable, fmt.Sprintf(
			"the downstream refused the credential of connection %s (%s); nothing was done. An administrator must check the connection", rel.Connection.ID, said)).Answered().Err()}
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
		return verdict{err: &handler.RetryableUpstream{Err: errors.New(said), After: c.retryAfter(x.header)}}
	}
	switch {
	case code >= 400 && code <= 499:
		return verdict{err: &handler.Invalid{Message: said}}
	case code == http.StatusNotImplemented || code == http.StatusHTTPVersionNotSupported:
		// The downstream will not serve this request however often it is
		// sent, and did not act on it.
		return verdict{err: handler.Explain(toolplane.CodeUnavailable, said).Err()}
	case code >= 500 && p.writes:
		return verdict{err: handler.Uncertain(said + "; the request had been sent, so its effect may have happened").Retryable(c.retryAfter(x.header)).Err()}
	case code >= 500:
		return verdict{err: &handler.RetryableUpstream{Err: errors.New(said), After: c.retryAfter(x.header)}}
	}
	// A redirect not followed, or an informational status: what it says
	// about the request is not an answer.
	if p.writes {
		return verdict{err: handler.Uncertain(said + ", which is not an answer; the request had been sent, so its effect may have happened").Err()}
	}
	return verdict{err: handler.Explain(toolplane.CodeUnavailable, said+", which is not an answer this tool reads").Err()}
}

// failed decides an attempt that got no answer. It is judge's apart
// because errors.As's target escapes: declared in judge, it was an
// allocation of every call, answered or not.
func (c *caller) failed(ctx context.Context, x *exchange, s *scrubber) verdict {
	var refused *egress.RefusedError
	switch {
	case errors.As(x.err, &refused) && (!x.sent || !c.plan.writes):
		// Refused by the connection's egress rules: when dialing (nothing
		// was sent), or a read's redirect (the read changed nothing).
		// The model is told only that; the host and rule are the
		// operator's.
		return verdict{err: &handler.DestinationRefused{Host: refused.Host, Addr: refused.Addr, Rule: refused.Rule}}
	case errors.As(x.err, &refused):
		return verdict{err: handler.Uncertain("the downstream answered the request with a redirect to a destination the connection's egress rules do not allow; " +
			"the request had been sent, so its effect may have happened").Err()}
	case !x.sent:
		if ctx.Err() != nil {
			return verdict{err: handler.Explain(toolplane.CodeUnavailable, "the call's time ran out before its request was sent; nothing was done").Err()}
		}
		return verdict{err: handler.Explain(toolplane.CodeUnavailable, s.scrub(fmt.Sprintf("the request was not sent: %v; nothing was done", x.err))).Err()}
	}
	return c.lost(ctx, s.scrub(fmt.Sprintf("the request was sent and its answer lost: %v", x.err)))
}

// lost decides an attempt that was sent and whose answer never arrived:
// transient, and for a write an effect that may have happened.
func (c *caller) lost(ctx context.Context, why string) verdict {
	if c.plan.writes {
		if ctx.Err() != nil {
			why = "the request was sent and no answer came before the call's deadline"
		}
		return verdict{err: handler.Uncertain(why + "; its effect may have happened").Retryable(0).Err()}
	}
	return verdict{err: &handler.RetryableUpstream{Err: errors.New(why)}}
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func (c *caller) retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(min(n, int(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(0, t.Sub(c.cfg.Now())), maxRetryAfter)
	}
	return 0
}

// credential answers the header that presents rel's secret to the
// downstream, under the connection's scheme. Its errors name the
// connection, never the secret.
func credential(rel *toolplane.Released) (name, value string, err error) {
	con, sec := rel.Connection, rel.Secrets
	tok := sec.Token.Reveal()
	if con.Kind == toolplane.ConnectionClientCredentials || con.Kind == toolplane.ConnectionAuthorizationCode {
		tok = sec.AccessToken.Reveal()
	}
	switch con.Config.Auth {
	case "", toolplane.AuthBearer:
		name, value = "Authorization", "Bearer "+tok
		if tok == "" {
			return "", "", fmt.Errorf("connection %s holds no token to present", con.ID)
		}
	case toolplane.AuthBasic:
		user, pass := sec.Username.Reveal(), sec.Password.Reveal()
		if user == "" && pass == "" {
			return "", "", fmt.Errorf("connection %s holds no user name or password to present", con.ID)
		}
		name, value = "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	case toolplane.AuthHeader:
		name, value = http.CanonicalHeaderKey(con.Config.Header), tok
		switch {
		case !token(name) || reservedHeaders[name] && name != "Authorization":
			return "", "", fmt.Errorf("connection %s names %q as its key header, which cannot carry a key", con.ID, con.Config.Header)
		case tok == "":
			return "", "", fmt.Errorf("connection %s holds no token to present", con.ID)
		}
	default:
		return "", "", fmt.Errorf("connection %s presents its secret by %q, which the http runtime does not know", con.ID, con.Config.Auth)
	}
	if strings.ContainsFunc(value, control) {
		return "", "", fmt.Errorf("connection %s holds a secret that cannot be sent in a header", con.ID)
	}
	return name, value, nil
}

// DownstreamKey answers what a downstream is sent as a call's idempotency
// key: a digest of it, the same on every attempt and every node, so the
// downstream still recognises a repeat. The key itself names the agent,
// the run and the person a call acts for, which are nobody else's
// business; the digest names none of them, and its 64 characters fit
// every API's limit on such a header.
func DownstreamKey(key string) string {
	sum := sha256.Sum256([]byte("toolplane idempotency key\x00" + key))
	return hex.EncodeToString(sum[:])
}
