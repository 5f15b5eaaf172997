package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/httperr"
)

// badQuery is a query parameter that does not read.
type badQuery struct{ field, msg string }

func (e *badQuery) Error() string { return e.msg }

// timeRange reads since and until (RFC 3339) into since and until.
func timeRange(q url.Values, since, until *time.Time) error {
	for _, t := range []struct {
		name string
		to   *time.Time
	}{{"since", since}, {"until", until}} {
		if v := q.Get(t.name); v != "" {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return &badQuery{t.name, t.name + " is a time in RFC 3339, such as 2026-07-01T08:00:00Z"}
			}
			*t.to = at
		}
	}
	return nil
}

// boolParam reads a query parameter that is true, false or absent.
func boolParam(q url.Values, name string) (*bool, error) {
	switch q.Get(name) {
	case "":
		return nil, nil
	case "true":
		v := true
		return &v, nil
	case "false":
		v := false
		return &v, nil
	}
	return nil, &badQuery{name, name + " is true or false"}
}

// auditFilterOf reads GET /v1/audit/events's query into a filter.
func auditFilterOf(q url.Values) (toolplane.AuditFilter, error) {
	f := toolplane.AuditFilter{RunID: q.Get("run_id"), AgentID: q.Get("agent_id"), UserID: q.Get("user_id"),
		Tool: q.Get("tool"), Outcome: q.Get("outcome"), ApprovalID: q.Get("approval_id"), TenantID: q.Get("tenant_id"),
		Effect: toolplane.Effect(q.Get("effect")), ApproverID: q.Get("approver_id"), Classification: q.Get("classification"),
		Person: q.Get("person")}
	for _, k := range q["kind"] {
		// A call's kind is the empty one; a query names it "call".
		if k == "call" {
			k = string(toolplane.AuditCall)
		}
		f.Kinds = append(f.Kinds, toolplane.AuditKind(k))
	}
	var err error
	if f.Approved, err = boolParam(q, "approved"); err != nil {
		return f, err
	}
	if f.Destructive, err = boolParam(q, "destructive"); err != nil {
		return f, err
	}
	return f, timeRange(q, &f.Since, &f.Until)
}

// sendBadQuery answers err when it is a parameter that does not read.
func sendBadQuery(w http.ResponseWriter, r *http.Request, err error) bool {
	var bad *badQuery
	if errors.As(err, &bad) {
		httperr.Send(w, r, httperr.InvalidRequest, bad.msg, bad.field)
		return true
	}
	return false
}

// auditReport answers a page of a canned compliance report.
func (s *Server) auditReport(w http.ResponseWriter, r *http.Request, c caller) {
	if s.refused(w, r, audit.MayRead(c.cred)) {
		return
	}
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	q := r.URL.Query()
	p := audit.ReportParams{Class: q.Get("class"), Person: q.Get("person")}
	if err := timeRange(q, &p.Since, &p.Until); sendBadQuery(w, r, err) {
		return
	}
	name := r.PathValue("name")
	evs, next, err := s.trail.Report(r.Context(), name, p, q.Get("cursor"), limit, c.cred)
	switch {
	case s.refused(w, r, err):
	case errors.Is(err, audit.ErrNoSuchReport):
		httperr.Send(w, r, httperr.NotFound, "no such report; the reports are destructive-without-approval, classification (class=), approvals-by (person=)", "name")
	case err != nil:
		httperr.Fail(w, r, s.Log, err)
	default:
		if evs == nil {
			evs = []toolplane.AuditEvent{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"report": name, "items": evs, "next_cursor": next})
	}
}

// exportSubject streams every event about one person as JSON Lines. Until
// the first line is written a failure is answered as any other; after,
// the stream is cut short, which a client reading JSON Lines sees as a
// body that ended without its last line's newline or early (the
// connection is closed mid-body).
func (s *Server) exportSubject(w http.ResponseWriter, r *http.Request, c caller) {
	q := r.URL.Query()
	var since, until time.Time
	if err := timeRange(q, &since, &until); sendBadQuery(w, r, err) {
		return
	}
	person := r.PathValue("person")
	started := false
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	n := 0
	err := s.trail.ExportSubject(r.Context(), person, since, until, c.cred, func(ev *toolplane.AuditEvent) error {
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Content-Disposition", `attachment; filename="subject-export.jsonl"`)
			w.WriteHeader(http.StatusOK)
		}
		if err := enc.Encode(ev); err != nil { // one line, newline included
			return err
		}
		if n++; n%exportFlush == 0 && flusher != nil {
			flusher.Flush()
		}
		return nil
	})
	switch {
	case started && err != nil:
		s.Log.Warn("subject export cut short", "err", err)
		panic(http.ErrAbortHandler) // the client must not take a partial export for a whole one
	case started:
	case s.refused(w, r, err):
	case err != nil:
		httperr.Fail(w, r, s.Log, err)
	default:
		// No event about the person: an empty export.
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
	}
}

// exportFlush is how many lines of an export are written between
// flushes: a client sees the export come, and the server holds no more
// than a buffer.
const exportFlush = 256

// auditExports answers what waits for each sink the trail is exported to.
func (s *Server) auditExports(w http.ResponseWriter, r *http.Request, c caller) {
	st, err := s.AuditExports.Status(r.Context(), c.cred)
	if s.refused(w, r, err) {
		return
	}
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sinks": st})
}
