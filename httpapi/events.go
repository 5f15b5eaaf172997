package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/httperr"
)

// DefaultHeartbeat is how often an idle event stream sends a comment, so
// a proxy does not take the quiet connection for a dead one.
const DefaultHeartbeat = 15 * time.Second

// eventStream is the media type of server-sent events.
const eventStream = "text/event-stream"

// acceptsEvents reports whether r asks for server-sent events: the
// media type is listed and not refused by a quality of zero ("q=0" means
// "not acceptable", RFC 9110 12.4.2).
func acceptsEvents(r *http.Request) bool {
	// Split's slice would be an allocation of every call.
	for part := range strings.SplitSeq(r.Header.Get("Accept"), ",") {
		media, params, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(media), eventStream) && !refused(params) {
			return true
		}
	}
	return false
}

// refused reports whether a media range's parameters give it a quality
// of zero (q=0, 0.0, 0.000), which refuses it.
func refused(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		name, value, _ := strings.Cut(p, "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		return err == nil && q == 0
	}
	return false
}

// chunkEvent is the data of a chunk event: one piece of the call's
// output, as the result boundary left it.
type chunkEvent struct {
	Seq       int64           `json:"seq"`
	Data      json.RawMessage `json:"data"`
	Truncated bool            `json:"truncated"`
	Untrusted bool            `json:"untrusted"`
}

// cutEvent is the data of a cut event: the stream's bound cut it there.
type cutEvent struct {
	Seq int64           `json:"seq"`
	Cut json.RawMessage `json:"cut"`
}

// invocationEvents answers an asynchronous call's stream as server-sent
// events (see streamEvents), from the chunk after the one a reconnecting
// client names in Last-Event-ID (or ?after=).
func (s *Server) invocationEvents(w http.ResponseWriter, r *http.Request, c caller) {
	if s.Door.Async == nil {
		httperr.Send(w, r, httperr.NotFound, "this deployment runs every call in its request", "")
		return
	}
	after, field, err := lastEventID(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), field)
		return
	}
	// Read once before the stream opens, so a call the caller may not
	// read answers 404 as GET /v1/invocations/{id} does.
	call, err := s.Door.Async.Get(r.Context(), c.cred.OrganizationID, r.PathValue("id"), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	s.streamEvents(w, r, c, call, after, false)
}

// lastEventID answers the number of the last chunk a client read, from
// its Last-Event-ID header or ?after=; 0 when it names none.
func lastEventID(r *http.Request) (int64, string, error) {
	v, field := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if q := r.URL.Query().Get("after"); q != "" {
		v, field = q, "after"
	}
	if v == "" {
		return 0, "", nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, field, errLastEventID
	}
	return n, "", nil
}

var errLastEventID = errors.New("Last-Event-ID (or after) is the number of the last chunk read, such as 12")

// streamEvents writes call's stream to w as server-sent events, and ends
// the response when the call ended:
//
//	event: accepted  the call, when the stream answers its submission
//	                 (accepted says so), so a client that loses the
//	                 connection resumes by its id
//	id: n, event: chunk  each chunk after after, in order
//	id: n, event: cut    the bound of the stream cut it here
//	event: result    the call once ended: its status and bounded result
//
// and a comment every heartbeat while nothing happens. The chunks come
// from the store, so a client may resume on any node; a client that
// leaves loses nothing (the call runs on, and its stream is kept).
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, c caller, call *toolplane.AsyncCall, after int64, accepted bool) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	// The stream lasts as long as the call: a server-wide write deadline
	// would cut it.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", eventStream)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	var buf bytes.Buffer
	send := func() bool {
		_, err := w.Write(buf.Bytes())
		buf.Reset()
		return err == nil && rc.Flush() == nil
	}
	if accepted {
		writeEvent(&buf, 0, "accepted", s.asyncView(call, false))
		if !send() {
			return
		}
	}
	beat := s.Heartbeat
	if beat <= 0 {
		beat = DefaultHeartbeat
	}
	org, id := call.OrganizationID, call.ID
	for {
		cur, chunks, err := s.Door.Async.Events(ctx, org, id, c.cred, after, beat)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// The headers are sent: the failure is told as an event.
			s.Log.ErrorContext(ctx, "event stream ended by a failure", "call", id, "err", err)
			writeEvent(&buf, 0, "error", httperr.Problem{Code: httperr.Internal, Message: "the platform could not read this call's stream; reconnect with Last-Event-ID to resume"}.Envelope(httperr.RequestID(r)))
			send()
			return
		}
		for _, ch := range chunks {
			if ch.Cut {
				writeEvent(&buf, ch.Seq, "cut", cutEvent{Seq: ch.Seq, Cut: ch.Data})
			} else {
				writeEvent(&buf, ch.Seq, "chunk", chunkEvent{Seq: ch.Seq, Data: ch.Data, Truncated: ch.Truncated, Untrusted: ch.Untrusted})
			}
			after = ch.Seq
		}
		switch {
		case len(chunks) > 0:
		case cur.Status.Terminal():
			// Read before its chunks, and every chunk is stored before
			// a call ends: nothing follows.
			writeEvent(&buf, 0, "result", s.asyncView(cur, false))
			send()
			return
		default:
			buf.WriteString(": waiting\n\n")
		}
		if !send() {
			return
		}
	}
}

// writeEvent appends one event to buf: its id (when seq is set), its
// name, and v's JSON on one data line (JSON holds no line break).
func writeEvent(buf *bytes.Buffer, seq int64, name string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte(`{"error":"unrenderable"}`)
	}
	if seq > 0 {
		buf.WriteString("id: ")
		buf.WriteString(strconv.FormatInt(seq, 10))
		buf.WriteByte('\n')
	}
	buf.WriteString("event: ")
	buf.WriteString(name)
	buf.WriteString("\ndata: ")
	buf.Write(data)
	buf.WriteString("\n\n")
}
