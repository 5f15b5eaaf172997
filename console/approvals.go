package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/signin"
)

// pageSize is how many approvals a page of the inbox or the history shows.
const pageSize = 50

func (c *Console) approvalRoutes(mux *http.ServeMux) {
	mux.Handle("GET "+Path+"/approvals", c.page(c.approvalList))
	mux.Handle("GET "+Path+"/approvals/{id}", c.page(c.approvalCard))
	mux.Handle("POST "+Path+"/approvals/{id}", c.action(c.decide))
}

// approvals answers the approval service the invoker files approvals
// with: the console reads and answers approvals through it, as the API
// does.
func (c *Console) approvals() (*approval.Service, error) {
	a := c.cfg.Invoker.Approvals()
	if a == nil {
		return nil, fmt.Errorf("%w: no approval service is wired", invoke.ErrFault)
	}
	return a, nil
}

// approvalView is an approval as a page shows it: redacted as the API
// shows it (approval.Shown), with what its stored invocation and its
// tool's definition tell about it.
type approvalView struct {
	toolplane.Approval
	// Arguments is the redacted arguments, indented.
	Arguments string
	// Agent, User, Tenant and RootRun come from the stored invocation.
	Agent, User, Tenant, RootRun string
	// Description and Metered come from the tool's definition.
	Description string
	Metered     bool
	// Approvers is how many distinct people must approve.
	Approvers int
}

func (c *Console) viewOf(a toolplane.Approval) approvalView {
	org := a.OrganizationID
	a = approval.ShownWith(a, c.cfg.Registry.Sensitive(org, a.Tool, a.ToolVersion))
	v := approvalView{Approval: a, Approvers: max(a.Approvers, 1)}
	var out bytes.Buffer
	if json.Indent(&out, a.Arguments, "", "  ") == nil {
		v.Arguments = out.String()
	} else {
		v.Arguments = string(a.Arguments)
	}
	if inv, err := approval.DecodeInvocation(a.Invocation); err == nil {
		v.Agent, v.User, v.Tenant, v.RootRun = inv.AgentID, inv.UserID, inv.TenantID, inv.RootRunID
	}
	if t, ok := c.cfg.Registry.Get(org, a.Tool); ok {
		v.Description, v.Metered = t.Def.Description, t.Def.Metered
	}
	return v
}

// listPage is the inbox, or the history of one state.
type listPage struct {
	frame
	Status   toolplane.ApprovalStatus
	Statuses []toolplane.ApprovalStatus
	Items    []approvalView
	Next     string
}

var statuses = []toolplane.ApprovalStatus{toolplane.ApprovalPending, toolplane.ApprovalApproved, toolplane.ApprovalRejected, toolplane.ApprovalExpired}

func (c *Console) approvalList(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.approvals()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	status := toolplane.ApprovalStatus(q.Get("status"))
	if status == "" {
		status = toolplane.ApprovalPending
	}
	if !slices.Contains(statuses, status) {
		return fmt.Errorf("%w: no approval state %q", toolplane.ErrInvalid, status)
	}
	// A person who may answer approvals is shown theirs; one who may only
	// read them (an auditor) every pending one, as the history shows the
	// other states. The services decide either way.
	list, title := svc.Recent, "Approvals "+string(status)
	if status == toolplane.ApprovalPending && approval.MayAnswer(sess.Credential) == nil {
		title = "Approvals waiting for you"
		list = func(ctx context.Context, _ toolplane.ApprovalStatus, after string, limit int, by *toolplane.Credential) ([]toolplane.Approval, string, error) {
			return svc.Inbox(ctx, after, limit, by)
		}
	}
	as, next, err := list(r.Context(), status, q.Get("cursor"), pageSize, sess.Credential)
	if err != nil {
		return err
	}
	v := listPage{frame: c.frameFor(sess, title, "approvals"), Status: status, Statuses: statuses}
	for _, a := range as {
		v.Items = append(v.Items, c.viewOf(a))
	}
	if next != "" {
		v.Next = c.path("/approvals") + "?" + url.Values{"status": {string(status)}, "cursor": {next}}.Encode()
	}
	c.render(w, r, http.StatusOK, "approvals", v)
	return nil
}

// cardPage is one approval, with the decision form when the person may
// answer it.
type cardPage struct {
	frame
	A approvalView
	// Decide is set when the approval waits and the person may answer it;
	// otherwise Why says why they may not, in the service's words.
	Decide bool
	Why    string
	// Link is a one-click link's token the decision form carries, when
	// the page was opened from one that is valid; LinkRefused says why
	// one was not accepted.
	Link, LinkRefused string
	CSRF              string
	Action            string
}

func (c *Console) approvalCard(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.approvals()
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := toolplane.CheckLen("approval id", id, toolplane.MaxRefLen); err != nil {
		return err
	}
	a, err := svc.Get(r.Context(), id, sess.Credential)
	if err != nil {
		return err
	}
	v := cardPage{frame: c.frameFor(sess, "Approval "+a.ID, "approvals"), A: c.viewOf(*a), CSRF: sess.CSRF,
		Action: c.path("/approvals/" + url.PathEscape(a.ID))}
	if a.Status == toolplane.ApprovalPending {
		if err := approval.MayDecide(sess.Credential, a); err != nil {
			v.Why = problem(err).Message
		} else {
			v.Decide = true
		}
	}
	if token := r.URL.Query().Get("link"); token != "" && c.cfg.Links != nil && v.Decide {
		if err := c.cfg.Links.Check(r.Context(), token, a.ID); err != nil {
			v.LinkRefused = "The link you followed is not valid any more (it expired, was used, or is not for this approval). You can still answer here."
		} else {
			v.Link = token
		}
	}
	if done := r.URL.Query().Get("done"); done != "" {
		v.Notice = "Your answer was recorded."
	}
	c.render(w, r, http.StatusOK, "approval", v)
	return nil
}

// maxReason bounds a decision's reason.
const maxReason = 2000

func (c *Console) decide(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	id := r.PathValue("id")
	if err := toolplane.CheckLen("approval id", id, toolplane.MaxRefLen); err != nil {
		return err
	}
	var d approval.Decision
	switch r.PostFormValue("decision") {
	case "approve":
		d.Approve = true
	case "reject":
	default:
		return fmt.Errorf("%w: the decision is approve or reject", toolplane.ErrInvalid)
	}
	d.Reason = strings.TrimSpace(r.PostFormValue("reason"))
	if len(d.Reason) > maxReason {
		return fmt.Errorf("%w: the reason is longer than %d bytes", toolplane.ErrInvalid, maxReason)
	}
	if token := r.PostFormValue("link"); token != "" && c.cfg.Links != nil {
		// A person the service would refuse does not use the link up:
		// the refusal is the same without it.
		svc, err := c.approvals()
		if err != nil {
			return err
		}
		a, err := svc.Get(r.Context(), id, sess.Credential)
		if err != nil {
			return err
		}
		if err := approval.MayDecide(sess.Credential, a); err != nil {
			return err
		}
		// The link is used up before the answer is recorded, so two
		// answers sent with one link record one.
		if err := c.cfg.Links.Use(r.Context(), token, id); err != nil {
			return fmt.Errorf("%w: the link was used already, expired, or is not for this approval; open the approval from the inbox", toolplane.ErrConflict)
		}
	}
	a, err := c.cfg.Invoker.Resolve(r.Context(), id, d, sess.Credential)
	if err != nil {
		return err
	}
	http.Redirect(w, r, c.path("/approvals/"+url.PathEscape(a.ID))+"?done=1", http.StatusSeeOther)
	return nil
}
