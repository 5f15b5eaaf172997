package server

import (
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/discovery/embed"
	"github.com/toolplane/toolplane/discovery/offline"
	"github.com/toolplane/toolplane/discovery/signals"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/secret"
)

// EmbeddingsKeyEnv is the environment variable the embeddings endpoint's
// key is read from (or EmbeddingsConfig.KeyFile).
const EmbeddingsKeyEnv = "TOOLPLANE_EMBEDDINGS_KEY"

// EmbeddingsConfig turns on semantic search through an OpenAI-compatible
// embeddings endpoint (Ollama, vLLM, a hosted one). Off when URL is
// empty: the search ranks by words alone.
type EmbeddingsConfig struct {
	// URL is the endpoint: the service's base, its /v1, or the
	// embeddings path itself (see embed.Endpoint).
	URL string
	// Model is the model it embeds with; vectors are kept per model, so
	// another model embeds every version again.
	Model string
	// Key, when the endpoint wants one, as $TOOLPLANE_EMBEDDINGS_KEY gives
	// it; KeyFile may give it instead (one line, readable by its owner
	// only), never both. It is never logged nor shown in an error.
	Key     toolplane.SecretString
	KeyFile string
	// Timeout bounds a search's wait for its query's vector: past it the
	// search answers from the words, and says so (default
	// DefaultEmbeddingsTimeout).
	Timeout time.Duration
	// PerMinute bounds the requests each node's background embedding
	// sends a minute (default 60); Batch is the texts one carries
	// (default 32).
	PerMinute, Batch int
}

// DefaultEmbeddingsTimeout is how long a search waits for its query's
// vector by default.
const DefaultEmbeddingsTimeout = 300 * time.Millisecond

// embedEvery is how often each node looks for versions without a vector
// when the catalogue did not say it changed.
const embedEvery = 5 * time.Minute

// buildDiscovery answers the node's search index, its ranking signals
// (health from traffic's breakers and the calls the invoker observes, and
// popularity when configured) and, when configured, the semantic signal,
// whose background embedding it starts.
func (s *Server) buildDiscovery(svc *services) (*discovery.Index, *signals.Keeper, error) {
	keeper := signals.New(signals.Config{Traffic: svc.traffic, Popularity: s.cfg.SearchPopularity})
	// The snapshot a search reads is kept current in the background: a
	// search reads no clock and takes no lock per candidate.
	s.loops.Go(func() { keeper.Run(s.bg) })
	// The offline default (the shipped thesaurus), and the signals.
	opt := offline.Options()
	opt.Signals = keeper
	ec := s.cfg.Embeddings
	if ec.URL != "" {
		if ec.Model == "" {
			return nil, nil, &ConfigError{Field: "Embeddings.Model", Err: errNoModel}
		}
		store, ok := s.b.Store.(toolplane.EmbeddingStore)
		if !ok {
			return nil, nil, &ConfigError{Field: "Embeddings.URL", Err: errNoEmbeddingStore}
		}
		key := ec.Key
		if key != "" || ec.KeyFile != "" {
			var err error
			if key, err = secret.LoadToken(EmbeddingsKeyEnv, "embeddings key", string(ec.Key), ec.KeyFile); err != nil {
				return nil, nil, &ConfigError{Field: "Embeddings.KeyFile", Err: err}
			}
		}
		client, err := embed.NewClient(embed.ClientConfig{URL: ec.URL, Model: ec.Model, Key: key})
		if err != nil {
			return nil, nil, &ConfigError{Field: "Embeddings.URL", Err: err}
		}
		sem := embed.NewSemantic(client)
		s.closers = append(s.closers, sem.Follow(s.reg))
		embedder := embed.NewEmbedder(embed.EmbedderConfig{Client: client, Semantic: sem, Store: store,
			Items: embed.Items(s.reg, s.b.Store), Batch: ec.Batch, PerMinute: ec.PerMinute, Logger: s.log})
		s.closers = append(s.closers, s.reg.Watch(embedder.Changed))
		s.loops.Go(func() { embedder.Run(s.bg, embedEvery) })
		opt.Semantic, opt.SemanticTimeout = sem, ec.Timeout
		if opt.SemanticTimeout <= 0 {
			opt.SemanticTimeout = DefaultEmbeddingsTimeout
		}
	}
	return discovery.New(opt), keeper, nil
}

// errNoModel: an endpoint named without its model.
var errNoModel = toolplane.Refine(toolplane.ErrInvalid, "name the model the embeddings endpoint embeds with")

// errNoEmbeddingStore: the database keeps no embeddings.
var errNoEmbeddingStore = toolplane.Refine(toolplane.ErrInvalid, "this database keeps no tool embeddings")

// observers tells each of its observers of every call.
type observers []invoke.Observer

// ObserveCall tells every observer.
func (o observers) ObserveCall(c *invoke.Observation) {
	for _, ob := range o {
		ob.ObserveCall(c)
	}
}
