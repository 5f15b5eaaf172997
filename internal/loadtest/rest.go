package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
)

// REST invokes a tool through toolplane's REST API:
// POST {BaseURL}/v1/tools/{Tool}/invoke with {"arguments": ...}, and for
// a write an idempotency key of its own on every call, so each call is a
// fresh claim and journal write rather than a replay.
type REST struct {
	Label   string
	BaseURL string // e.g. http://127.0.0.1:8080
	Key     string // an agent's API key
	Tool    string // the platform name, e.g. demo.search_tickets
	// Arguments is the JSON object sent as arguments; nil sends {}.
	Arguments json.RawMessage
	// Expect, when set, must occur in every answer's body.
	Expect string
	// Write sends every call with a distinct idempotency_key.
	Write bool
}

// Name answers the target's label.
func (t *REST) Name() string { return t.Label }

// clientSeq numbers the clients of this process, so the idempotency keys
// of one run's clients never meet.
var clientSeq atomic.Int64

// NewClient answers a client with a keep-alive connection of its own, as an
// independent agent process would hold.
func (t *REST) NewClient(context.Context) (Client, error) {
	args := t.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	body, err := json.Marshal(struct {
		Arguments json.RawMessage `json:"arguments"`
	}{args})
	if err != nil {
		return nil, fmt.Errorf("rest %s: arguments: %w", t.Label, err)
	}
	c := &restClient{
		hc:     &http.Client{Transport: newTransport(1)},
		url:    t.BaseURL + "/v1/tools/" + url.PathEscape(t.Tool) + "/invoke",
		auth:   "Bearer " + t.Key,
		body:   body,
		expect: []byte(t.Expect),
		buf:    bytes.NewBuffer(make([]byte, 0, 4096)),
	}
	if t.Write {
		// The key is spliced in before the closing brace: the body
		// starts as {"arguments":...} and ends ,"idempotency_key":"..."}.
		c.keyPrefix = fmt.Sprintf("load-%d-%d-%d-", os.Getpid(), time.Now().UnixNano(), clientSeq.Add(1))
		c.body = c.body[:len(c.body)-1]
	}
	return c, nil
}

// newTransport answers a transport keeping up to idle connections to a
// host. The default of 2 would make 16 clients sharing one transport open
// and close connections on every call, measuring the TCP handshake rather
// than the server.
func newTransport(idle int) *http.Transport {
	return &http.Transport{
		MaxIdleConns:        idle,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
}

type restClient struct {
	hc     *http.Client
	url    string
	auth   string
	body   []byte
	expect []byte
	buf    *bytes.Buffer
	// keyPrefix, for a write, starts every call's idempotency key; n
	// counts the calls.
	keyPrefix string
	n         int64
}

func (c *restClient) Call(ctx context.Context) error {
	body := c.body
	if c.keyPrefix != "" {
		// A body of its own per call: the transport may still hold the
		// last one.
		c.n++
		body = append(append(slices.Clip(c.body), `,"idempotency_key":"`...), c.keyPrefix...)
		body = append(strconv.AppendInt(body, c.n, 10), `"}`...)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("rest request: %w", err)
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("rest call: %w", err)
	}
	defer resp.Body.Close()
	c.buf.Reset()
	// Read the whole body, so the connection goes back to the pool.
	if _, err := c.buf.ReadFrom(resp.Body); err != nil {
		return fmt.Errorf("rest answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("rest call: status %d: %s", resp.StatusCode, clip(c.buf.Bytes()))
	}
	if !bytes.HasPrefix(c.buf.Bytes(), []byte(`{"ok":true`)) || !bytes.Contains(c.buf.Bytes(), c.expect) {
		return fmt.Errorf("rest call: unexpected answer: %s", clip(c.buf.Bytes()))
	}
	return nil
}

func (c *restClient) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// clip shortens an answer quoted in an error.
func clip(b []byte) string {
	const n = 300
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// HTTPGet sends GET to URL with a bearer key: the JSON API called
// directly or through a proxy, the baselines of an http tool.
type HTTPGet struct {
	Label string
	URL   string
	// Key, when set, is sent as Authorization: Bearer.
	Key string
	// Expect, when set, must occur in every answer's body.
	Expect string
}

// Name answers the target's label.
func (t *HTTPGet) Name() string { return t.Label }

// NewClient answers a client with a keep-alive connection of its own.
func (t *HTTPGet) NewClient(context.Context) (Client, error) {
	c := &getClient{hc: &http.Client{Transport: newTransport(1)}, url: t.URL, expect: []byte(t.Expect),
		buf: bytes.NewBuffer(make([]byte, 0, 4096))}
	if t.Key != "" {
		c.auth = "Bearer " + t.Key
	}
	return c, nil
}

type getClient struct {
	hc     *http.Client
	url    string
	auth   string
	expect []byte
	buf    *bytes.Buffer
}

func (c *getClient) Call(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return fmt.Errorf("get request: %w", err)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	defer resp.Body.Close()
	c.buf.Reset()
	if _, err := c.buf.ReadFrom(resp.Body); err != nil {
		return fmt.Errorf("get answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get: status %d: %s", resp.StatusCode, clip(c.buf.Bytes()))
	}
	if !bytes.Contains(c.buf.Bytes(), c.expect) {
		return fmt.Errorf("get: unexpected answer: %s", clip(c.buf.Bytes()))
	}
	return nil
}

func (c *getClient) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}
