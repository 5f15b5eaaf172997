package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/httperr"
)

// Durable sessions. A session lives in the store (toolplane.Session): its
// identity, the credential that opened it, its door, negotiated version,
// the client's initialize parameters, its run and the contracts it froze.
// The node that serves a request keeps the session in memory (the SDK's
// half and toolplane's), so a call reads nothing from the store; a node
// that meets a session id it does not hold reads the stored session once
// and restores it, so any node, and a node restarted, continues a session
// its client still holds, without sticky sessions.
//
// The SDK keeps its sessions in a map of its own and has no way to add one.
// A node restores a session the way the SDK opens one: it hands the SDK's
// handler an initialize, for the stored id (the server's GetSessionID
// answers it), with the client's stored parameters and the negotiated
// version, and the notifications/initialized that follows; both answers
// are discarded. The SDK then holds the session bound to the credential of
// the request that restored it, which is the one stored (checked first).
//
// Each node touches the stored session at most every SessionTouch while
// it serves it, which moves its expiry on by the idle time: expiry is
// exact to within SessionTouch. The touch is also how a node learns a
// session it holds was ended elsewhere (a DELETE on another node, or
// expiry): a session found gone is ended on this node too, so a session
// ended on one node is refused on every other within SessionTouch. It
// reads the session's frozen contracts too, so a node that restored a
// session holds its calls, within SessionTouch, to what its client listed
// through another node since.

// defaultSessionTouch is how often a node touches a session it serves.
const defaultSessionTouch = 5 * time.Second

// maxStoredClient bounds the client's initialize parameters kept with a
// session; larger ones are not kept (the session is restored with the
// protocol version alone, as a client that declared no capabilities).
const maxStoredClient = 16 << 10

// sweepEvery is how often, at most, a node deletes expired sessions from
// the store (at a session's opening).
const sweepEvery = time.Minute

func (s *Server) touchEvery() time.Duration {
	if s.SessionTouch > 0 {
		return s.SessionTouch
	}
	return defaultSessionTouch
}

// credentialOf answers the credential a request authenticated as.
func credentialOf(r *http.Request) *toolplane.Credential {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		cred, _ := ti.Extra["credential"].(*toolplane.Credential)
		return cred
	}
	return nil
}

// runOf answers the run of the session of cred with the SDK's id sid.
func runOf(cred *toolplane.Credential, sid string) string {
	return "mcp:" + cred.ID + ":" + sid
}

// store records a session the client has just initialised, before the
// answer to its initialize leaves: the client's next request may reach
// another node.
func (sess *session) store(ctx context.Context, ss *mcp.ServerSession, version string) error {
	st := sess.s.Sessions
	if st == nil || sess.restored {
		return nil
	}
	var client []byte
	if p := ss.InitializeParams(); p != nil {
		if b, err := json.Marshal(p); err == nil && len(b) <= maxStoredClient {
			client = b
		}
	}
	now := time.Now()
	row := &toolplane.Session{ID: ss.ID(), OrganizationID: sess.cred.OrganizationID, CredentialID: storedOwner(sess.cred), Door: sess.upstream,
		ProtocolVersion: version, Client: client, RunID: runOf(sess.cred, ss.ID()), CreatedAt: now, ExpiresAt: now.Add(sess.s.idle())}
	if err := st.InsertSession(context.WithoutCancel(ctx), row); err != nil {
		return fmt.Errorf("store session: %w", err)
	}
	sess.runID = row.RunID
	sess.touched.Store(now.UnixNano())
	return nil
}

// touch moves the stored session's expiry on, when the last touch is
// SessionTouch old, and answers false when the session is no longer
// stored (ended on another node, or expired): the caller ends it here.
// The touch also reads the session's frozen contracts, and takes them when
// they differ from the ones held here: the client may have listed through
// another node since this one restored the session, and the run holds to
// what it was last shown wherever it continues.
func (sess *session) touch(ctx context.Context) bool {
	st := sess.s.Sessions
	ss := sess.ss.Load()
	if st == nil || ss == nil {
		return true
	}
	now := time.Now()
	last := sess.touched.Load()
	if now.Sub(time.Unix(0, last)) < sess.s.touchEvery() || !sess.touched.CompareAndSwap(last, now.UnixNano()) {
		return true
	}
	ctx = context.WithoutCancel(ctx)
	org := sess.cred.OrganizationID
	err := st.TouchSession(ctx, org, ss.ID(), now.Add(sess.s.idle()))
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		return false
	case err != nil:
		// The store is unreachable for a moment: the call goes on, and
		// the next request touches again.
		sess.touched.Store(last)
		sess.s.Log.WarnContext(ctx, "session touch failed", "err", err)
		return true
	}
	sess.mu.Lock()
	listings := sess.listings
	sess.mu.Unlock()
	row, err := st.GetSession(ctx, org, ss.ID())
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		return false
	case err != nil:
		// The contracts held here stay; the next touch reads again.
		sess.s.Log.WarnContext(ctx, "session contracts not read", "err", err)
		return true
	}
	sess.mu.Lock()
	// None stored while some are held here means their store failed: the
	// ones held here are the newer.
	if sess.listings == listings && len(row.Contracts) > 0 && !maps.Equal(row.Contracts, sess.shown) {
		// A new map, never a change to the one calls hold.
		sess.shown = maps.Clone(row.Contracts)
	}
	sess.mu.Unlock()
	return true
}

// endHere ends the session on this node only: what it asks the client is
// abandoned, the SDK's half closed, and it is forgotten.
func (sess *session) endHere() {
	sess.closing.Store(true)
	sess.abandon()
	if ss := sess.ss.Load(); ss != nil {
		ss.Close()
	}
	sess.forget()
}

// saveContracts stores the contracts the client was just shown.
func (sess *session) saveContracts(ctx context.Context, shown map[string]string) {
	st := sess.s.Sessions
	ss := sess.ss.Load()
	if st == nil || ss == nil {
		return
	}
	if err := st.SetSessionContracts(context.WithoutCancel(ctx), sess.cred.OrganizationID, ss.ID(), shown); err != nil {
		sess.s.Log.WarnContext(ctx, "session contracts not stored", "err", err)
	}
}

// restoringKey carries, in a restoring initialize's context, the server
// built for the session restored.
type restoringKey struct{}

// stored answers what a request carrying the session id sid that this node
// does not hold is: the session restored here (nil, false when there is
// nothing to restore: the SDK answers such a request as it does any unknown
// session), or true when the request was answered (a refusal, or a DELETE).
func (s *Server) stored(w http.ResponseWriter, r *http.Request, sid, door string, sdk http.Handler) (*session, bool) {
	cred := credentialOf(r)
	if s.Sessions == nil || cred == nil {
		return nil, false
	}
	// One restore per session id at a time: a second request for it waits
	// for the first, then finds it held.
	s.restoreMu.Lock()
	if s.restoring == nil {
		s.restoring = map[string]chan struct{}{}
	}
	for {
		wait, busy := s.restoring[sid]
		if !busy {
			break
		}
		s.restoreMu.Unlock()
		select {
		case <-wait:
		case <-r.Context().Done():
			return nil, false
		}
		s.restoreMu.Lock()
	}
	if sess := s.session(sid); sess != nil {
		s.restoreMu.Unlock()
		return sess, false
	}
	s.mu.Lock()
	old := s.byID[sid]
	s.mu.Unlock()
	if old != nil {
		if old.closing.Load() {
			// Ending on this node right now: the SDK still holds the id, and
			// a restore would name a second session after it. The SDK
			// answers as for a session it is closing.
			s.restoreMu.Unlock()
			return nil, false
		}
		// The SDK dropped it on its own: forgotten here, then restored.
		old.forget()
	}
	done := make(chan struct{})
	s.restoring[sid] = done
	s.restoreMu.Unlock()
	defer func() {
		s.restoreMu.Lock()
		delete(s.restoring, sid)
		s.restoreMu.Unlock()
		close(done)
	}()

	// The organization is the presenting credential's: another
	// organization's session is not found, whatever its id.
	row, err := s.Sessions.GetSession(r.Context(), cred.OrganizationID, sid)
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		return nil, false
	case err != nil:
		s.Log.ErrorContext(r.Context(), "session lookup failed", "err", err)
		fail(w, httperr.Unavailable, "sessions cannot be read right now; try again shortly")
		return nil, true
	case row.Door != door:
		return nil, false
	case !time.Now().Before(row.ExpiresAt):
		// Expired and not swept yet: gone, as it would be on the node
		// that held it.
		_, _ = s.Sessions.DeleteSession(context.WithoutCancel(r.Context()), row.OrganizationID, row.ID)
		return nil, false
	case row.CredentialID != storedOwner(cred):
		// The SDK's own answer to another credential presenting a
		// session it holds.
		fail(w, httperr.Denied, "session user mismatch")
		return nil, true
	}
	if r.Method == http.MethodDelete {
		// Ending a session needs nothing of it here: the stored row goes,
		// and the node that holds it learns at its next touch.
		if _, err := s.Sessions.DeleteSession(context.WithoutCancel(r.Context()), row.OrganizationID, row.ID); err != nil {
			s.Log.ErrorContext(r.Context(), "session delete failed", "err", err)
			fail(w, httperr.Unavailable, "the session cannot be ended right now; try again shortly")
			return nil, true
		}
		w.WriteHeader(http.StatusNoContent)
		return nil, true
	}
	// A restored session is held here as one opened here is, so it counts
	// against the same caps: else one key could hold its cap on every
	// node here, and a restart would bring every stored session back
	// uncapped. The reservation is released once the session is held
	// (and counted as such) or the restore failed.
	release, refusal := s.reserve(r)
	if refusal != nil {
		refusal.write(w, nil)
		return nil, true
	}
	defer release()
	sess, err := s.restore(r, row, cred, sdk)
	if err != nil {
		s.Log.ErrorContext(r.Context(), "session restore failed", "session_door", door, "err", err)
		fail(w, httperr.Unavailable, "the session cannot be continued right now; try again shortly")
		return nil, true
	}
	return sess, false
}

// restore makes the stored session row one this node holds, through the
// SDK's handler sdk (see the package's note on durable sessions).
func (s *Server) restore(r *http.Request, row *toolplane.Session, cred *toolplane.Credential, sdk http.Handler) (*session, error) {
	asked, _ := askedListing(r)
	srv, sess := s.build(cred, row.Door, row, asked)
	var params map[string]any
	if len(row.Client) > 0 {
		_ = json.Unmarshal(row.Client, &params)
	}
	if params == nil {
		params = map[string]any{}
	}
	params["protocolVersion"] = row.ProtocolVersion
	if _, ok := params["clientInfo"]; !ok {
		params["clientInfo"] = map[string]any{"name": "restored", "version": "0"}
	}
	if _, ok := params["capabilities"]; !ok {
		params["capabilities"] = map[string]any{}
	}
	ctx := context.WithValue(r.Context(), restoringKey{}, srv)
	init, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
	if code := s.synthetic(ctx, r, sdk, init, ""); code != http.StatusOK {
		sess.endHere()
		return nil, fmt.Errorf("restoring initialize answered %d", code)
	}
	if sess.ss.Load() == nil {
		sess.endHere()
		return nil, errors.New("restoring initialize opened no session")
	}
	note := []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if code := s.synthetic(ctx, r, sdk, note, row.ID); code != http.StatusAccepted && code != http.StatusOK {
		sess.endHere()
		return nil, fmt.Errorf("restoring initialized answered %d", code)
	}
	sess.touched.Store(time.Now().UnixNano())
	return sess, nil
}

// synthetic sends body to the SDK's handler as a POST of r's client
// (its credential in ctx), for the session sid ("" for none), and answers
// the status; the answer itself is discarded.
func (s *Server) synthetic(ctx context.Context, r *http.Request, sdk http.Handler, body []byte, sid string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL.String(), bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Host, req.RemoteAddr = r.Host, r.RemoteAddr
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	d := &discard{header: http.Header{}}
	sdk.ServeHTTP(d, req)
	if d.code == 0 {
		return http.StatusOK
	}
	return d.code
}

// discard is a ResponseWriter that keeps the status alone.
type discard struct {
	header http.Header
	code   int
}

func (d *discard) Header() http.Header { return d.header }

func (d *discard) Write(b []byte) (int, error) {
	if d.code == 0 {
		d.code = http.StatusOK
	}
	return len(b), nil
}

func (d *discard) WriteHeader(code int) {
	if d.code == 0 {
		d.code = code
	}
}

func (d *discard) Flush() {}

// deleteStored ends the session in the store, for a DELETE its client
// sends to the node that holds it.
func (sess *session) deleteStored(ctx context.Context) error {
	st, ss := sess.s.Sessions, sess.ss.Load()
	if st == nil || ss == nil {
		return nil
	}
	_, err := st.DeleteSession(context.WithoutCancel(ctx), sess.cred.OrganizationID, ss.ID())
	return err
}

// sweepStored deletes expired sessions from the store, at most every
// sweepEvery per node, in the background: the lazy half of expiry (a
// session found expired at lookup is deleted then) leaves the rows nobody
// asks for again.
func (s *Server) sweepStored() {
	if s.Sessions == nil {
		return
	}
	now := time.Now()
	last := s.storeSwept.Load()
	if now.Sub(time.Unix(0, last)) < sweepEvery || !s.storeSwept.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for range 100 {
			n, err := s.Sessions.DeleteExpiredSessions(ctx, now, 1000)
			if err != nil {
				s.Log.Warn("expired sessions not swept", "err", err)
				return
			}
			if n < 1000 {
				return
			}
		}
	}()
}

// The _meta keys of a tools/call that name the caller's own run and
// idempotency key (the REST door's run_id and idempotency_key), and the
// approval the caller says covers the call (the REST door's authorized_by).
const (
	metaRunID          = "toolplane/run_id"
	metaIdempotencyKey = "toolplane/idempotency_key"
	metaAuthorizedBy   = "toolplane/authorized_by"
	// metaOnBehalfOf names the person a call acts for, as the REST
	// door's on_behalf_of does: only a key allowed to act for users may
	// name one.
	metaOnBehalfOf = "toolplane/on_behalf_of"
)
