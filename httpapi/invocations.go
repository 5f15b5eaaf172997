package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/async"
	"github.com/toolplane/toolplane/httperr"
)

// asyncView is how the API shows an asynchronous call: where it stands,
// where to poll it, and once ended its bounded result.
type asyncView struct {
	ID              string                `json:"id"`
	Tool            string                `json:"tool"`
	Status          toolplane.AsyncStatus `json:"status"`
	StatusURL       string                `json:"status_url"`
	CancelURL       string                `json:"cancel_url,omitempty"`
	Existing        bool                  `json:"existing,omitempty"`
	Result          json.RawMessage       `json:"result,omitempty"`
	Code            string                `json:"code,omitempty"`
	Approval        *asyncApproval        `json:"approval,omitempty"`
	CancelRequested bool                  `json:"cancel_requested,omitempty"`
	Callback        *asyncCallback        `json:"callback,omitempty"`
	CreatedAt       time.Time             `json:"created_at"`
	StartedAt       *time.Time            `json:"started_at,omitempty"`
	EndedAt         *time.Time            `json:"ended_at,omitempty"`
}

// asyncApproval names the approval a call waits (or waited) for.
type asyncApproval struct {
	ID string `json:"id"`
}

// asyncCallback is where the delivery of a call's result stands: the
// attempts made, and while they fail why the last did and when the next
// is due (a delivery clears the error).
type asyncCallback struct {
	URL           string                  `json:"url"`
	State         toolplane.CallbackState `json:"state,omitempty"`
	Attempts      int                     `json:"attempts"`
	LastError     string                  `json:"last_error,omitempty"`
	NextAttemptAt *time.Time              `json:"next_attempt_at,omitempty"`
}

// asyncView answers the view of c.
func (s *Server) asyncView(c *toolplane.AsyncCall, existing bool) asyncView {
	v := asyncView{ID: c.ID, Tool: c.Tool, Status: c.Status, StatusURL: s.statusPath(c.ID), Existing: existing,
		Result: c.Result, Code: c.Code, CancelRequested: c.CancelRequested, CreatedAt: c.CreatedAt}
	if !c.Status.Terminal() {
		v.CancelURL = v.StatusURL + "/cancel"
	}
	if c.ApprovalID != "" {
		v.Approval = &asyncApproval{ID: c.ApprovalID}
	}
	if c.CallbackURL != "" {
		v.Callback = &asyncCallback{URL: async.ShownURL(c.CallbackURL), State: c.CallbackState, Attempts: c.CallbackAttempts,
			LastError: c.CallbackError}
		if c.CallbackState == toolplane.CallbackPending && !c.CallbackNextAt.IsZero() {
			v.Callback.NextAttemptAt = &c.CallbackNextAt
		}
	}
	if !c.StartedAt.IsZero() {
		v.StartedAt = &c.StartedAt
	}
	if !c.EndedAt.IsZero() {
		v.EndedAt = &c.EndedAt
	}
	return v
}

// statusPath answers the status URL of call id: absolute under the public
// URL when the server knows it.
func (s *Server) statusPath(id string) string {
	return strings.TrimRight(s.PublicURL, "/") + "/v1/invocations/" + id
}

// maxWait bounds ?wait: a longer poll holds a connection a proxy may cut.
const maxWait = 60 * time.Second

// getInvocation answers an asynchronous call as it stands, or, with
// ?wait=30s, once it ended or the wait ran out, whichever comes first.
func (s *Server) getInvocation(w http.ResponseWriter, r *http.Request, c caller) {
	if s.Door.Async == nil {
		httperr.Send(w, r, httperr.NotFound, "this deployment runs every call in its request", "")
		return
	}
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > maxWait {
			httperr.Send(w, r, httperr.InvalidRequest, "wait is a duration from 0s to 60s, such as 30s", "wait")
			return
		}
		wait = d
	}
	call, err := s.Door.Async.Wait(r.Context(), c.cred.OrganizationID, r.PathValue("id"), c.cred, wait)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, s.asyncView(call, false))
}

// cancelInvocation asks for an asynchronous call to be cancelled: 200 with
// the call once it ended (cancelled, or ended before the cancel), 202
// while a running call is being told to stop.
func (s *Server) cancelInvocation(w http.ResponseWriter, r *http.Request, c caller) {
	if s.Door.Async == nil {
		httperr.Send(w, r, httperr.NotFound, "this deployment runs every call in its request", "")
		return
	}
	call, err := s.Door.Async.Cancel(r.Context(), c.cred.OrganizationID, r.PathValue("id"), c.cred)
	if err != nil {
		httperr.Fail(w, r, s.Log, err)
		return
	}
	status := http.StatusOK
	if !call.Status.Terminal() {
		status = http.StatusAccepted
	}
	writeJSON(w, status, s.asyncView(call, false))
}
