package embed

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/registry"
)

var _ discovery.Semantic = (*Semantic)(nil)

// maxText bounds the text of one tool embedded: its name, title, hints and
// tags come first, so a long description loses its tail, not what names
// the tool.
const maxText = 8 << 10

// Text answers the text of a definition that is embedded: its name (its
// words), title, search hints, tags, description, and its parameters'
// names and descriptions.
func Text(def *toolplane.Definition) string {
	var b strings.Builder
	line := func(s string) {
		if s = strings.TrimSpace(s); s != "" && b.Len() < maxText {
			b.WriteString(s)
			b.WriteByte('\n')
		}
	}
	line(strings.NewReplacer(".", " ", "_", " ", "-", " ").Replace(def.Name))
	line(def.Title)
	line(strings.Join(def.SearchHints, "; "))
	line(strings.Join(def.Tags, ", "))
	line(def.Description)
	var schema struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if json.Unmarshal(def.InputSchema, &schema) == nil && len(schema.Properties) > 0 {
		names := make([]string, 0, len(schema.Properties))
		for n := range schema.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			line(n + ": " + schema.Properties[n].Description)
		}
	}
	s := b.String()
	if len(s) > maxText {
		s = strings.ToValidUTF8(s[:maxText], "")
	}
	return s
}

// Hash answers the hex SHA-256 of text: what a stored vector was computed
// from.
func Hash(text string) string {
	h := sha256.Sum256([]byte(text))
	return hex.EncodeToString(h[:])
}

// Encode answers v as stored: little-endian float32s.
func Encode(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// Decode answers a stored vector, scaled to length 1, or false when it is
// not one (not whole float32s, a value not finite, no length).
func Decode(b []byte) ([]float32, bool) {
	if len(b) == 0 || len(b)%4 != 0 || len(b) > toolplane.MaxEmbeddingBytes {
		return nil, false
	}
	v := make([]float64, len(b)/4)
	for i := range v {
		v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	u, err := unit(v)
	return u, err == nil
}

// Semantic scores a search's candidates by the cosine similarity of their
// vectors to the query's (discovery.Semantic). It holds the vectors of
// every text the node embedded or loaded, by the text's hash: a vector is
// the model's and the text's alone, so the same text in two organizations
// has one, and nothing of one organization is read for another's search
// beyond what its own candidates' texts are.
type Semantic struct {
	client *Client

	mu   sync.RWMutex
	vecs map[string][]float32
	// dims is the vectors' size, fixed by the first held: a model
	// answering another size later answers garbage.
	dims int

	// hashes caches each served tool's text hash (a *registry.Tool is
	// never changed once served), replaced whole when the registry
	// changes.
	hashes atomic.Pointer[map[*registry.Tool]string]
}

// NewSemantic answers a Semantic asking client for the queries' vectors.
func NewSemantic(client *Client) *Semantic {
	s := &Semantic{client: client, vecs: map[string][]float32{}}
	empty := map[*registry.Tool]string{}
	s.hashes.Store(&empty)
	return s
}

// Model answers the model the vectors are of.
func (s *Semantic) Model() string { return s.client.Model() }

// Follow keeps the text hashes of every version reg serves, until stop is
// called.
func (s *Semantic) Follow(reg *registry.Registry) (stop func()) {
	stop = reg.Watch(func() { s.rehash(reg.Every()) })
	s.rehash(reg.Every())
	return stop
}

func (s *Semantic) rehash(ts []*registry.Tool) {
	old := *s.hashes.Load()
	m := make(map[*registry.Tool]string, len(ts))
	for _, t := range ts {
		if h, ok := old[t]; ok {
			m[t] = h
		} else {
			m[t] = Hash(Text(&t.Def))
		}
	}
	s.hashes.Store(&m)
}

// hashOf answers t's text hash.
func (s *Semantic) hashOf(t *registry.Tool) string {
	if h, ok := (*s.hashes.Load())[t]; ok {
		return h
	}
	return Hash(Text(&t.Def))
}

// Has reports whether a vector of the text hash is held.
func (s *Semantic) Has(hash string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.vecs[hash]
	return ok
}

// Hold keeps v as the vector of the text hash, unless its size is not
// the held vectors'; it reports whether it was kept.
func (s *Semantic) Hold(hash string, v []float32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dims == 0 {
		s.dims = len(v)
	}
	if len(v) != s.dims {
		return false
	}
	s.vecs[hash] = v
	return true
}

// keepOnly lets go of every held vector whose text hash is not in live.
// The size stays: the store keeps the model's other rows, of that size.
func (s *Semantic) keepOnly(live map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h := range s.vecs {
		if !live[h] {
			delete(s.vecs, h)
		}
	}
}

// Dimensions answers the held vectors' size (0 before the first).
func (s *Semantic) Dimensions() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.dims
}

// Similar answers each candidate's cosine similarity to text, NaN for one
// whose vector is not held yet. The query is embedded under ctx (the
// search's bound); an endpoint failing or answering a vector of another
// size than the held ones is an error, and the search goes on without
// the signal.
func (s *Semantic) Similar(ctx context.Context, text string, candidates []*registry.Tool) ([]float64, error) {
	q, err := s.query(ctx, text)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(candidates))
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(q) != s.dims {
		return nil, fmt.Errorf("%w: a query vector of %d dimensions, the tools' are %d", ErrEndpoint, len(q), s.dims)
	}
	for i, t := range candidates {
		v, ok := s.vecs[s.hashOf(t)]
		if !ok {
			out[i] = math.NaN()
			continue
		}
		var dot float32
		for j := range v {
			dot += v[j] * q[j]
		}
		out[i] = float64(dot)
	}
	return out, nil
}

// query answers text's vector. Queries' vectors are not cached: a cache
// shared by every organization's searches would tell one, by how fast it
// answers, what another searched for.
func (s *Semantic) query(ctx context.Context, text string) ([]float32, error) {
	vs, err := s.client.Embed(ctx, []string{text})
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}
