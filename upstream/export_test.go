package upstream

import "context"

// CallVia calls a remote tool on slug's current session by the lean path,
// or through the SDK client when sdk is set, whatever the server: tests and
// benchmarks compare the two paths on one session, and call tools the
// server never listed (which Binding refuses before sending).
func (s *Set) CallVia(ctx context.Context, slug, name, key string, args any, sdk bool) (any, error) {
	u := s.ups[slug]
	u.mu.Lock()
	cs, via := u.session, u.via
	t, listed := u.remote[name]
	structured := listed && t.OutputSchema != nil
	u.mu.Unlock()
	if cs == nil {
		return nil, ErrNotConnected
	}
	if sdk {
		return u.callSDK(ctx, cs, name, callMeta{Key: key}, args, structured)
	}
	return u.callHTTP(ctx, cs, via, name, callMeta{Key: key}, args, structured)
}

// Session answers the ID of slug's current session ("" when none), and
// whether the caller sends its calls by the lean path.
func (s *Set) Session(slug string) (id string, leanPath bool) {
	u := s.ups[slug]
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session == nil {
		return "", false
	}
	return u.session.ID(), lean(u.session, u.client)
}
