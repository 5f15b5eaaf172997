package upstream

import (
	"context"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Catalogue is what a server publishes besides tools: resources, resource
// templates and prompts, as last read. The governed copy of the server
// relays them as they are; they are not tool calls, so they are not
// decided, journalled or bounded by the invoker.
type Catalogue struct {
	Resources []*mcp.Resource
	Templates []*mcp.ResourceTemplate
	Prompts   []*mcp.Prompt
	// Subscribe reports whether the server takes resource subscriptions.
	Subscribe bool
}

// relay is the resource and prompt half of an upstream.
type relay struct {
	mu        sync.Mutex
	cat       Catalogue
	subs      map[string]int // URI -> downstream subscriptions
	listeners map[int]func(uri string)
	next      int
}

// Catalogue answers what the server last published besides tools.
func (s *Set) Catalogue(slug string) (Catalogue, bool) {
	u, ok := s.ups[slug]
	if !ok {
		return Catalogue{}, false
	}
	u.relay.mu.Lock()
	defer u.relay.mu.Unlock()
	return u.relay.cat, true
}

// ReadResource reads a resource from the server.
func (s *Set) ReadResource(ctx context.Context, slug, uri string) (*mcp.ReadResourceResult, error) {
	cs, err := s.session(slug)
	if err != nil {
		return nil, err
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	return res, s.ups[slug].scrub(err)
}

// GetPrompt gets a prompt from the server.
func (s *Set) GetPrompt(ctx context.Context, slug string, p *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	cs, err := s.session(slug)
	if err != nil {
		return nil, err
	}
	res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: p.Name, Arguments: p.Arguments})
	return res, s.ups[slug].scrub(err)
}

// Subscribe subscribes to a resource's updates on behalf of one downstream
// session. toolplane holds one subscription per resource at the server,
// however many sessions asked for it.
func (s *Set) Subscribe(ctx context.Context, slug, uri string) error {
	u, ok := s.ups[slug]
	if !ok {
		return fmt.Errorf("%w: no upstream %q", ErrConfig, slug)
	}
	cs, err := s.session(slug)
	if err != nil {
		return err
	}
	u.relay.mu.Lock()
	first := u.relay.subs[uri] == 0
	u.relay.subs[uri]++
	u.relay.mu.Unlock()
	if !first {
		return nil
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		u.relay.mu.Lock()
		u.relay.subs[uri]--
		u.relay.mu.Unlock()
		return u.scrub(err)
	}
	return nil
}

// Unsubscribe ends one downstream session's subscription; the last one
// ends toolplane's at the server.
func (s *Set) Unsubscribe(ctx context.Context, slug, uri string) error {
	u, ok := s.ups[slug]
	if !ok {
		return fmt.Errorf("%w: no upstream %q", ErrConfig, slug)
	}
	u.relay.mu.Lock()
	if u.relay.subs[uri] == 0 {
		u.relay.mu.Unlock()
		return nil
	}
	u.relay.subs[uri]--
	last := u.relay.subs[uri] == 0
	if last {
		delete(u.relay.subs, uri)
	}
	u.relay.mu.Unlock()
	if !last {
		return nil
	}
	cs, err := s.session(slug)
	if err != nil {
		return nil // the server's session is gone, and its subscriptions with it
	}
	return cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
}

// OnChange calls fn when the server announces an updated resource (uri
// set) or its resources or prompts changed (uri empty), until stop.
func (s *Set) OnChange(slug string, fn func(uri string)) (stop func()) {
	u, ok := s.ups[slug]
	if !ok {
		return func() {}
	}
	u.relay.mu.Lock()
	defer u.relay.mu.Unlock()
	id := u.relay.next
	u.relay.next++
	u.relay.listeners[id] = fn
	return func() {
		u.relay.mu.Lock()
		delete(u.relay.listeners, id)
		u.relay.mu.Unlock()
	}
}

func (r *relay) notify(uri string) {
	r.mu.Lock()
	fns := make([]func(string), 0, len(r.listeners))
	for _, fn := range r.listeners {
		fns = append(fns, fn)
	}
	r.mu.Unlock()
	for _, fn := range fns {
		fn(uri)
	}
}

func (s *Set) session(slug string) (*mcp.ClientSession, error) {
	u, ok := s.ups[slug]
	if !ok {
		return nil, fmt.Errorf("%w: no upstream %q", ErrConfig, slug)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session == nil {
		return nil, ErrNotConnected
	}
	return u.session, nil
}

// syncCatalogue reads the server's resources, templates and prompts, as
// far as it says it has them.
func (u *upstream) syncCatalogue(ctx context.Context, cs *mcp.ClientSession) error {
	var cat Catalogue
	caps := cs.InitializeResult().Capabilities
	if caps != nil && caps.Resources != nil {
		cat.Subscribe = caps.Resources.Subscribe
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return fmt.Errorf("list resources of %s: %w", u.cfg.Slug, err)
			}
			cat.Resources = append(cat.Resources, r)
		}
		for t, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return fmt.Errorf("list resource templates of %s: %w", u.cfg.Slug, err)
			}
			cat.Templates = append(cat.Templates, t)
		}
	}
	if caps != nil && caps.Prompts != nil {
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return fmt.Errorf("list prompts of %s: %w", u.cfg.Slug, err)
			}
			cat.Prompts = append(cat.Prompts, p)
		}
	}
	u.relay.mu.Lock()
	u.relay.cat = cat
	u.relay.mu.Unlock()
	u.relay.notify("")
	return nil
}
