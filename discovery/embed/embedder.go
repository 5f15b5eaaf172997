package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/registry"
)

// Item is one tool version to embed: the organization it is kept under
// ("" for the platform's own tools) and its definition.
type Item struct {
	Organization string
	Def          *toolplane.Definition
}

// Items answers every version the search may hold: the platform's own
// tools reg serves, and every organization's published versions that are
// served (active or deprecated) in store. It is the deployment's own read.
func Items(reg *registry.Registry, store toolplane.CatalogStore) func(ctx context.Context) ([]Item, error) {
	return func(ctx context.Context) ([]Item, error) {
		var out []Item
		for _, t := range reg.Platform() {
			out = append(out, Item{Def: &t.Def})
		}
		after := ""
		for {
			page, next, err := store.ListEveryToolVersion(ctx, toolplane.VersionFilter{States: []toolplane.VersionState{toolplane.StateActive, toolplane.StateDeprecated}}, after, 500)
			if err != nil {
				return nil, fmt.Errorf("versions to embed: %w", err)
			}
			for _, v := range page {
				var d toolplane.Definition
				if json.Unmarshal(v.Definition, &d) != nil {
					continue // the catalogue logs an unreadable definition
				}
				out = append(out, Item{Organization: v.OrganizationID, Def: &d})
			}
			if next == "" {
				return out, nil
			}
			after = next
		}
	}
}

// EmbedderConfig configures an Embedder.
type EmbedderConfig struct {
	Client   *Client
	Semantic *Semantic
	Store    toolplane.EmbeddingStore
	// Items answers the versions to embed (see Items).
	Items func(ctx context.Context) ([]Item, error)
	// Batch is how many texts one request carries (default 32, at most
	// MaxBatch).
	Batch int
	// PerMinute bounds the requests a node sends the endpoint a minute
	// (default 60).
	PerMinute int
	// Timeout bounds one request (default DefaultTimeout).
	Timeout time.Duration
	Logger  *slog.Logger
	Now     func() time.Time
}

// Embedder computes the vectors of every served version that has none
// for the configured model, in batches at a bounded rate, keeps them in
// the store and hands them to the Semantic. Each node runs one; a vector
// another node stored first is read, not asked for again.
type Embedder struct {
	cfg  EmbedderConfig
	kick chan struct{}
	// stored is the text hash of each version's row in the store, as
	// this node knows it.
	stored map[storedKey]string
}

type storedKey struct{ org, name, version string }

// NewEmbedder answers an Embedder of cfg.
func NewEmbedder(cfg EmbedderConfig) *Embedder {
	if cfg.Batch <= 0 {
		cfg.Batch = 32
	}
	cfg.Batch = min(cfg.Batch, MaxBatch)
	if cfg.PerMinute <= 0 {
		cfg.PerMinute = 60
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Embedder{cfg: cfg, kick: make(chan struct{}, 1), stored: map[storedKey]string{}}
}

// Changed asks for a pass soon: the catalogue changed.
func (e *Embedder) Changed() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Run loads the stored vectors of the model, then embeds what is missing,
// again whenever Changed is called and every interval, until ctx ends. A
// pass the endpoint fails is tried again later, waiting longer each time
// up to the interval.
func (e *Embedder) Run(ctx context.Context, every time.Duration) {
	if err := e.Load(ctx); err != nil && ctx.Err() == nil {
		e.cfg.Logger.WarnContext(ctx, "stored tool embeddings not loaded", "err", err)
	}
	wait := time.Duration(0)
	backoff := 5 * time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.kick:
		case <-time.After(wait):
		}
		n, err := e.Pass(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			e.cfg.Logger.WarnContext(ctx, "tool embeddings not computed; search ranks by words meanwhile", "err", err, "embedded", n)
			wait, backoff = backoff, min(2*backoff, every)
		default:
			if n > 0 {
				e.cfg.Logger.InfoContext(ctx, "tool embeddings computed", "embedded", n, "model", e.cfg.Client.Model())
			}
			wait, backoff = every, 5*time.Second
		}
	}
}

// Load hands the Semantic every vector the store holds for the model
// (those it cannot decode, or of another size, are left for a pass to
// compute again).
func (e *Embedder) Load(ctx context.Context) error {
	return e.cfg.Store.EachToolEmbedding(ctx, e.cfg.Client.Model(), func(te *toolplane.ToolEmbedding) error {
		if v, ok := Decode(te.Vector); ok && e.cfg.Semantic.Hold(te.TextHash, v) {
			e.stored[storedKey{te.OrganizationID, te.Name, te.Version}] = te.TextHash
		}
		return nil
	})
}

// pending is one version whose vector is to be stored.
type pending struct {
	key  storedKey
	text string
	hash string
}

// Pass embeds every version whose vector is missing, batch by batch at
// the configured rate, and answers how many it asked the endpoint for. It
// stops at the first batch the endpoint fails: nothing of that batch is
// kept.
func (e *Embedder) Pass(ctx context.Context) (int, error) {
	items, err := e.cfg.Items(ctx)
	if err != nil {
		return 0, err
	}
	model := e.cfg.Client.Model()
	var todo []pending
	live := make(map[string]bool, len(items))
	keys := make(map[storedKey]bool, len(items))
	for _, it := range items {
		text := Text(it.Def)
		p := pending{key: storedKey{it.Organization, it.Def.Name, it.Def.Version}, text: text, hash: Hash(text)}
		live[p.hash], keys[p.key] = true, true
		if e.stored[p.key] == p.hash {
			continue
		}
		if e.cfg.Semantic.Has(p.hash) {
			// The same text is held (another organization's, or a version
			// before): the row is a copy, no request.
			if err := e.put(ctx, p, model, nil); err != nil {
				return 0, err
			}
			continue
		}
		todo = append(todo, p)
	}
	// What no served version's text is any more is let go: a node whose
	// catalogue churns for months holds the vectors of what it serves,
	// not of everything it ever served.
	e.cfg.Semantic.keepOnly(live)
	for k := range e.stored {
		if !keys[k] {
			delete(e.stored, k)
		}
	}
	asked := 0
	gap := time.Minute / time.Duration(e.cfg.PerMinute)
	for len(todo) > 0 {
		n := min(e.cfg.Batch, len(todo))
		batch := todo[:n]
		todo = todo[n:]
		// Another node may have stored some meanwhile.
		var texts []string
		var ask []pending
		for _, p := range batch {
			if te, err := e.cfg.Store.GetToolEmbedding(ctx, p.key.org, p.key.name, p.key.version, model); err == nil && te.TextHash == p.hash {
				if v, ok := Decode(te.Vector); ok && e.cfg.Semantic.Hold(p.hash, v) {
					e.stored[p.key] = p.hash
					continue
				}
			} else if err != nil && !errors.Is(err, toolplane.ErrNotFound) {
				return asked, err
			}
			if e.cfg.Semantic.Has(p.hash) {
				if err := e.put(ctx, p, model, nil); err != nil {
					return asked, err
				}
				continue
			}
			texts = append(texts, p.text)
			ask = append(ask, p)
		}
		if len(ask) == 0 {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
		vs, err := e.cfg.Client.Embed(rctx, texts)
		cancel()
		asked += len(ask)
		if err != nil {
			return asked, err
		}
		if d := e.cfg.Semantic.Dimensions(); d != 0 && len(vs[0]) != d {
			return asked, fmt.Errorf("%w: vectors of %d dimensions, those held are %d", ErrEndpoint, len(vs[0]), d)
		}
		for i, p := range ask {
			if err := e.put(ctx, p, model, vs[i]); err != nil {
				return asked, err
			}
		}
		if len(todo) > 0 {
			select {
			case <-ctx.Done():
				return asked, ctx.Err()
			case <-time.After(gap):
			}
		}
	}
	return asked, nil
}

// put stores p's vector (v, or the one held of its text when v is nil)
// and holds it.
func (e *Embedder) put(ctx context.Context, p pending, model string, v []float32) error {
	if v == nil {
		e.cfg.Semantic.mu.RLock()
		v = e.cfg.Semantic.vecs[p.hash]
		e.cfg.Semantic.mu.RUnlock()
	}
	if !e.cfg.Semantic.Hold(p.hash, v) {
		return fmt.Errorf("%w: a vector of %d dimensions, those held are %d", ErrEndpoint, len(v), e.cfg.Semantic.Dimensions())
	}
	te := &toolplane.ToolEmbedding{OrganizationID: p.key.org, Name: p.key.name, Version: p.key.version, Model: model,
		TextHash: p.hash, Vector: Encode(v), CreatedAt: e.cfg.Now()}
	if err := e.cfg.Store.PutToolEmbedding(ctx, te); err != nil {
		return fmt.Errorf("keep the embedding of %s@%s: %w", p.key.name, p.key.version, err)
	}
	e.stored[p.key] = p.hash
	return nil
}
