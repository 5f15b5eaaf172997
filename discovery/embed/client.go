// Package embed is the optional semantic signal of the search
// (discovery.Semantic): an OpenAI-compatible embeddings endpoint the
// operator configures (Ollama, vLLM, a hosted one) places every tool
// version's text and each query, and candidates are scored by how close
// their vectors are to the query's.
//
// It is off unless configured, and never trusted: an endpoint that hangs,
// fails or answers anything but finite vectors of one size degrades the
// search to its words (discovery bounds the call) and nothing it answered
// is kept. The vectors of tool versions are kept in the store per
// organization, version and model (toolplane.EmbeddingStore), computed in
// the background by each node's Embedder, and held in memory, so a search
// pays for one call: its query's.
package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
)

// ErrEndpoint: the embeddings endpoint could not be reached, failed, or
// answered something that is not a vector per text. The error says which,
// never what the endpoint sent nor the key.
var ErrEndpoint = errors.New("embeddings endpoint")

// MaxDimensions is the most dimensions a vector may have.
const MaxDimensions = toolplane.MaxEmbeddingBytes / 4

// maxAnswer bounds the body of an answer read: a batch of MaxBatch
// vectors of a large model, written as JSON numbers, with room.
const maxAnswer = 64 << 20

// MaxBatch is the most texts one request carries.
const MaxBatch = 64

// ClientConfig configures a Client.
type ClientConfig struct {
	// URL is the endpoint: the service's base (http://ollama:11434,
	// https://api.openai.com), its /v1, or the embeddings path itself.
	URL string
	// Model is the model the endpoint embeds with.
	Model string
	// Key, when set, is sent as a bearer token. It is never logged nor
	// put in an error.
	Key toolplane.SecretString
	// HTTPClient sends the requests; nil is a client of its own that
	// follows no redirect (the key goes to the endpoint configured and no
	// other).
	HTTPClient *http.Client
}

// Client asks an OpenAI-compatible embeddings endpoint for vectors.
type Client struct {
	endpoint string
	model    string
	key      toolplane.SecretString
	hc       *http.Client
}

// Endpoint answers where u's embeddings are asked for: u itself when its
// path ends in /embeddings, u + /embeddings when it ends in /v1, and u +
// /v1/embeddings otherwise.
func Endpoint(u string) (string, error) {
	p, err := url.Parse(strings.TrimSpace(u))
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.User != nil {
		return "", fmt.Errorf("%w: embeddings URL: give http(s)://host[:port][/path], with no credentials in it", toolplane.ErrInvalid)
	}
	p.RawQuery, p.Fragment = "", ""
	path := strings.TrimRight(p.Path, "/")
	switch {
	case strings.HasSuffix(path, "/embeddings"):
	case strings.HasSuffix(path, "/v1"):
		path += "/embeddings"
	default:
		path += "/v1/embeddings"
	}
	p.Path = path
	return p.String(), nil
}

// NewClient answers a client of cfg, or an error wrapping
// toolplane.ErrInvalid when the URL or the model is not one.
func NewClient(cfg ClientConfig) (*Client, error) {
	endpoint, err := Endpoint(cfg.URL)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, fmt.Errorf("%w: embeddings model: name the model the endpoint embeds with", toolplane.ErrInvalid)
	}
	if strings.ContainsAny(cfg.Key.Reveal(), "\r\n") {
		return nil, fmt.Errorf("%w: embeddings key: holds a line break", toolplane.ErrInvalid)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Client{endpoint: endpoint, model: cfg.Model, key: cfg.Key, hc: hc}, nil
}

// Model answers the model the client embeds with.
func (c *Client) Model() string { return c.model }

// Embed answers a unit vector per text, in texts' order, all of one size.
// Anything else the endpoint answers (an error status, not JSON, another
// count, vectors of several sizes, too many dimensions, a value that is
// not a finite float32, a zero vector) is an error wrapping ErrEndpoint,
// and no vector.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	if len(texts) > MaxBatch {
		return nil, fmt.Errorf("%w: %d texts in one request, at most %d", toolplane.ErrInvalid, len(texts), MaxBatch)
	}
	body, err := json.Marshal(struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}{c.model, texts})
	if err != nil {
		return nil, fmt.Errorf("embeddings request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("embeddings request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key.Reveal())
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// A url.Error names the URL, which holds no credential (Endpoint
		// refuses one); the key is in a header, which it never names.
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", ErrEndpoint, ctx.Err())
		}
		return nil, fmt.Errorf("%w: not reached", ErrEndpoint)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, fmt.Errorf("%w: answered %d", ErrEndpoint, resp.StatusCode)
	}
	var answer struct {
		Data []struct {
			Index     *int      `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("%w: answer not read: %w", ErrEndpoint, err)
	}
	if len(raw) > maxAnswer {
		return nil, fmt.Errorf("%w: answer larger than %d bytes", ErrEndpoint, maxAnswer)
	}
	if json.Unmarshal(raw, &answer) != nil {
		return nil, fmt.Errorf("%w: answer is not an embeddings list", ErrEndpoint)
	}
	if len(answer.Data) != len(texts) {
		return nil, fmt.Errorf("%w: %d vectors for %d texts", ErrEndpoint, len(answer.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for i, d := range answer.Data {
		at := i
		if d.Index != nil {
			at = *d.Index
		}
		if at < 0 || at >= len(out) || out[at] != nil {
			return nil, fmt.Errorf("%w: vector index %d out of place", ErrEndpoint, at)
		}
		v, err := unit(d.Embedding)
		if err != nil {
			return nil, err
		}
		out[at] = v
	}
	for _, v := range out[1:] {
		if len(v) != len(out[0]) {
			return nil, fmt.Errorf("%w: vectors of %d and %d dimensions", ErrEndpoint, len(out[0]), len(v))
		}
	}
	return out, nil
}

// unit answers v scaled to length 1 as float32s, or an error when it has
// no dimension, too many, a value that is not a finite float32, or no
// length.
func unit(v []float64) ([]float32, error) {
	if len(v) == 0 || len(v) > MaxDimensions {
		return nil, fmt.Errorf("%w: a vector of %d dimensions", ErrEndpoint, len(v))
	}
	var norm float64
	for _, x := range v {
		if math.IsNaN(x) || math.Abs(x) > math.MaxFloat32 {
			return nil, fmt.Errorf("%w: a vector value that is not a finite float32", ErrEndpoint)
		}
		norm += x * x
	}
	norm = math.Sqrt(norm)
	if norm == 0 || math.IsInf(norm, 0) {
		return nil, fmt.Errorf("%w: a vector of no length", ErrEndpoint)
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out, nil
}

// DefaultTimeout bounds one request of the background embedding (a
// search's is bounded by the search: discovery.Options.SemanticTimeout).
const DefaultTimeout = 30 * time.Second
