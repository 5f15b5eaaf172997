package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/signin"
)

func (c *Console) auditRoutes(mux *http.ServeMux) {
	mux.Handle("GET "+Path+"/audit", c.page(c.auditList))
	mux.Handle("GET "+Path+"/audit/{id}", c.page(c.auditEvent))
}

// trail answers the audit trail, or that this server serves none.
func (c *Console) trail() (*audit.Trail, error) {
	if c.cfg.Trail == nil {
		return nil, fmt.Errorf("%w: the audit trail is not enabled on this server", toolplane.ErrNotFound)
	}
	return c.cfg.Trail, nil
}

// Outcome classes the search offers beside an exact code: a call that
// ran, one waiting for a person, and one that ended in any error code.
const (
	outcomeOK       = "ok"
	outcomeApproval = "approval_required"
	outcomeError    = "error"
)

// timeForm is how the search form's time fields are written (an HTML
// datetime-local input), read as UTC.
const timeForm = "2006-01-02T15:04"

// auditSearch is the search form as sent.
type auditSearch struct {
	Since, Until, Agent, User, Tool, Outcome, Code string
}

type auditPage struct {
	frame
	// Tab is the audit section's tab the page is (see retention.go).
	Tab      string
	Search   auditSearch
	Outcomes []string
	Codes    []toolplane.Code
	Items    []toolplane.AuditEvent
	Next     string
}

// filterOf reads the search form into the trail's filter. What the
// filter means is the trail's (and the store's): the page only reads the
// form.
func filterOf(q url.Values) (auditSearch, toolplane.AuditFilter, error) {
	s := auditSearch{Since: q.Get("since"), Until: q.Get("until"), Agent: strings.TrimSpace(q.Get("agent")),
		User: strings.TrimSpace(q.Get("user")), Tool: strings.TrimSpace(q.Get("tool")), Outcome: q.Get("outcome"), Code: q.Get("code")}
	f := toolplane.AuditFilter{AgentID: s.Agent, UserID: s.User, Tool: s.Tool}
	for _, t := range []struct {
		name, v string
		to      *time.Time
	}{{"since", s.Since, &f.Since}, {"until", s.Until, &f.Until}} {
		if t.v == "" {
			continue
		}
		at, err := time.Parse(timeForm, t.v)
		if err != nil {
			return s, f, fmt.Errorf("%w: %s is a date and time, YYYY-MM-DDTHH:MM (UTC)", toolplane.ErrInvalid, t.name)
		}
		*t.to = at
	}
	switch s.Outcome {
	case "":
	case outcomeOK, outcomeApproval:
		f.Outcome = s.Outcome
	case outcomeError:
		for _, code := range toolplane.Codes {
			f.Outcomes = append(f.Outcomes, string(code))
		}
	default:
		return s, f, fmt.Errorf("%w: no outcome %q", toolplane.ErrInvalid, s.Outcome)
	}
	if s.Code != "" {
		if !toolplane.Code(s.Code).Valid() {
			return s, f, fmt.Errorf("%w: no error code %q", toolplane.ErrInvalid, s.Code)
		}
		if f.Outcome != "" {
			return s, f, fmt.Errorf("%w: an event with the outcome %s has no error code", toolplane.ErrInvalid, f.Outcome)
		}
		f.Outcome, f.Outcomes = s.Code, nil
	}
	return s, f, nil
}

func (c *Console) auditList(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	trail, err := c.trail()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	search, f, err := filterOf(q)
	if err != nil {
		return err
	}
	evs, next, err := trail.List(r.Context(), f, q.Get("cursor"), pageSize, sess.Credential)
	if err != nil {
		return err
	}
	v := auditPage{frame: c.frameFor(sess, "Audit trail", "audit"), Tab: "trail", Search: search, Items: evs,
		Outcomes: []string{outcomeOK, outcomeApproval, outcomeError}, Codes: slices.Clone(toolplane.Codes)}
	if next != "" {
		more := url.Values{"cursor": {next}}
		for k, vs := range q {
			if k != "cursor" && len(vs) > 0 && vs[0] != "" {
				more.Set(k, vs[0])
			}
		}
		v.Next = c.path("/audit") + "?" + more.Encode()
	}
	c.render(w, r, http.StatusOK, "audit", v)
	return nil
}

type eventPage struct {
	frame
	E *toolplane.AuditEvent
	// PolicyInput is the document the rules decided on, indented.
	PolicyInput string
	// Arguments are the call's arguments as the event keeps them
	// (redacted, bounded), indented.
	Arguments string
}

func (c *Console) auditEvent(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	trail, err := c.trail()
	if err != nil {
		return err
	}
	ev, err := trail.Get(r.Context(), r.PathValue("id"), sess.Credential)
	if err != nil {
		return err
	}
	v := eventPage{frame: c.frameFor(sess, "Audit event "+ev.ID, "audit"), E: ev}
	if len(ev.PolicyInput) > 0 {
		v.PolicyInput = indent(ev.PolicyInput)
	}
	if len(ev.Arguments) > 0 {
		v.Arguments = indent(ev.Arguments)
	}
	c.render(w, r, http.StatusOK, "audit-event", v)
	return nil
}
