package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

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
	mux.Handle("POST "+Path+"/approvals/{id}/confirm", c.action(c.confirmDecision))
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
	// Cost is what the meter tells of a metered call; nil for a tool that
	// is not metered.
	Cost *costView
	// Approvers is how many distinct people must approve.
	Approvers int
}

func (c *Console) viewOf(a toolplane.Approval, cs *costs) approvalView {
	org := a.OrganizationID
	a = approval.ShownWith(a, c.cfg.Registry.Sensitive(org, a.Tool, a.ToolVersion))
	v := approvalView{Approval: a, Approvers: max(a.Approvers, 1)}
	var out bytes.Buffer
	if json.Indent(&out, a.Arguments, "", "  ") == nil {
		v.Arguments = out.String()
	} else {
		v.Arguments = string(a.Arguments)
	}
	inv, err := approval.DecodeInvocation(a.Invocation)
	if err == nil {
		v.Agent, v.User, v.Tenant, v.RootRun = inv.AgentID, inv.UserID, inv.TenantID, inv.RootRunID
	}
	if t, ok := c.cfg.Registry.Get(org, a.Tool); ok {
		v.Description, v.Metered = t.Def.Description, t.Def.Metered
	}
	if v.Metered {
		// The run tree's spend is what the meter charges the run with:
		// its root's, or the run's own when it has no parent.
		var root string
		var ceiling int64
		if err == nil {
			root, ceiling = inv.EffectiveRootRunID(), inv.Ceilings.MaxCostCents
		}
		v.Cost = cs.of(a.Tool, root, ceiling)
	}
	return v
}

// costView is what a card says of a metered call's cost: what the tool's
// recent calls cost, and what its run tree has spent against its ceiling.
type costView struct {
	// Read is false when the meter could not be read: the card says so,
	// rather than tell a person no calls were measured.
	Read bool
	// Calls is how many calls the estimate averages, over the last Days;
	// Average and Max are in cents, Average rounded.
	Calls        int
	Days         int
	Average, Max int64
	// Spent is the run tree's spend so far in cents, when SpentRead;
	// Ceiling the run's cost ceiling from its invocation, 0 for none.
	SpentRead bool
	Spent     int64
	Ceiling   int64
}

// costs reads the cost facts of the approvals one page shows, through the
// approval service: each tool's estimate once and each run tree's spend
// once, however many cards name them, so an inbox of fifty cards of one
// tool makes one estimate query, not fifty.
type costs struct {
	ctx   context.Context
	log   func(msg string, args ...any)
	svc   *approval.Service
	by    *toolplane.Credential
	tools map[string]*toolplane.UsageStats // nil: the meter was not read
	spent map[string]*int64
}

func (c *Console) costsFor(ctx context.Context, svc *approval.Service, by *toolplane.Credential) *costs {
	return &costs{ctx: ctx, svc: svc, by: by, tools: map[string]*toolplane.UsageStats{}, spent: map[string]*int64{},
		log: func(msg string, args ...any) { c.log.ErrorContext(ctx, msg, args...) }}
}

// of answers the cost view of a call of tool in run tree root ("" when the
// invocation names none) under ceiling. A read that fails is logged once
// and shown as not read: a card is still worth showing without its
// estimate, and the decision is the person's either way.
func (cs *costs) of(tool, root string, ceiling int64) *costView {
	st, ok := cs.tools[tool]
	if !ok {
		got, err := cs.svc.Estimate(cs.ctx, tool, cs.by)
		if err != nil {
			cs.log("cost estimate not read", "tool", tool, "err", err)
		} else {
			st = &got
		}
		cs.tools[tool] = st
	}
	v := &costView{Days: int(approval.EstimateWindow / (24 * time.Hour)), Ceiling: ceiling}
	if st != nil {
		v.Read, v.Calls, v.Average, v.Max = true, st.Calls, int64(math.Round(st.AverageCents)), st.MaxCents
	}
	if root == "" {
		return v
	}
	spent, ok := cs.spent[root]
	if !ok {
		got, err := cs.svc.Spend(cs.ctx, root, cs.by)
		if err != nil {
			cs.log("run spend not read", "run", root, "err", err)
		} else {
			spent = &got
		}
		cs.spent[root] = spent
	}
	if spent != nil {
		v.SpentRead, v.Spent = true, *spent
	}
	return v
}

// listPage is the inbox, or the history of one state.
type listPage struct {
	frame
	Status toolplane.ApprovalStatus
	// Tabs are the states' lists, each with the filter kept.
	Tabs  []tab
	Items []listItem
	Next  string
	// F is the filter the list was read with, as its form shows it;
	// Query its canonical query (without the state), which the
	// decisions sent from the list bring the person back to; Ages the
	// choices of its age filter; Filtered says a condition is set.
	F        listFilter
	Query    string
	Ages     []ageChoice
	Filtered bool
	// Narrowed says a filter beyond the search is set: the form shows
	// its fields open.
	Narrowed bool
	CSRF     string
}

// tab is one state's list, as the tabs link it.
type tab struct {
	Status toolplane.ApprovalStatus
	Href   string
}

// listItem is one card of a list: the approval, whether it may be
// answered from the list, and, once approved, what became of its call.
type listItem struct {
	approvalView
	// Quick is set for an approval the person may answer from the list:
	// one that waits for one person's answer. One that needs several
	// distinct approvers is answered from its own page, where who
	// approved so far is shown beside the buttons.
	Quick bool
	// After is what became of the call an approved approval let through;
	// AfterUnread says it could not be read.
	After       *invoke.Aftermath
	AfterUnread bool
}

var statuses = []toolplane.ApprovalStatus{toolplane.ApprovalPending, toolplane.ApprovalApproved, toolplane.ApprovalRejected, toolplane.ApprovalExpired}

// listFilter is the inbox's filter as its form sends it: the query
// parameters tool, agent, group, age, min, max and q.
type listFilter struct {
	Tool, Agent, Group, Age, Min, Max, Q string
}

// ageChoice is one choice of the age filter: filed within, or waiting
// longer than, a span.
type ageChoice struct {
	Value, Label string
	span         time.Duration
	older        bool
}

var ages = []ageChoice{
	{"", "any age", 0, false},
	{"1h", "filed in the last hour", time.Hour, false},
	{"24h", "filed in the last day", 24 * time.Hour, false},
	{"older1h", "waiting over an hour", time.Hour, true},
	{"older24h", "waiting over a day", 24 * time.Hour, true},
}

// maxFilterField bounds each of the filter's fields.
const maxFilterField = toolplane.MaxApprovalFilterText

// parseFilter reads the filter of the query q, and answers it with the
// service's filter and the canonical query string it is written as. A
// field too long, an unknown age or an amount that is not one is
// refused: the page says so rather than show a list the person did not
// ask for.
func parseFilter(q url.Values, now time.Time) (listFilter, approval.Filter, string, error) {
	lf := listFilter{Tool: strings.TrimSpace(q.Get("tool")), Agent: strings.TrimSpace(q.Get("agent")), Group: strings.TrimSpace(q.Get("group")),
		Age: q.Get("age"), Min: strings.TrimSpace(q.Get("min")), Max: strings.TrimSpace(q.Get("max")), Q: strings.TrimSpace(q.Get("q"))}
	var f approval.Filter
	for _, v := range []struct{ name, value string }{{"tool", lf.Tool}, {"agent", lf.Agent}, {"group", lf.Group}, {"search", lf.Q}, {"age", lf.Age}, {"min", lf.Min}, {"max", lf.Max}} {
		if len(v.value) > maxFilterField {
			return lf, f, "", fmt.Errorf("%w: the %s is longer than %d bytes", toolplane.ErrInvalid, v.name, maxFilterField)
		}
	}
	f.Tool, f.Agent, f.Group, f.Text = lf.Tool, lf.Agent, lf.Group, lf.Q
	i := slices.IndexFunc(ages, func(a ageChoice) bool { return a.Value == lf.Age })
	if i < 0 {
		return lf, f, "", fmt.Errorf("%w: no age %q", toolplane.ErrInvalid, lf.Age)
	}
	if a := ages[i]; a.span > 0 {
		if a.older {
			f.Before = now.Add(-a.span)
		} else {
			f.Since = now.Add(-a.span)
		}
	}
	var err error
	if f.MinCents, err = parseAmount("min", lf.Min); err != nil {
		return lf, f, "", err
	}
	if f.MaxCents, err = parseAmount("max", lf.Max); err != nil {
		return lf, f, "", err
	}
	v := url.Values{}
	for _, p := range []struct{ name, value string }{{"tool", lf.Tool}, {"agent", lf.Agent}, {"group", lf.Group}, {"age", lf.Age}, {"min", lf.Min}, {"max", lf.Max}, {"q", lf.Q}} {
		if p.value != "" {
			v.Set(p.name, p.value)
		}
	}
	return lf, f, v.Encode(), nil
}

// parseAmount reads an amount of the filter ("120", "12.50") in
// hundredths; "" is no bound.
func parseAmount(name, s string) (*int64, error) {
	if s == "" {
		return nil, nil
	}
	whole, frac, _ := strings.Cut(s, ".")
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w < 0 || w > math.MaxInt64/100-1 || len(frac) > 2 || strings.TrimLeft(frac, "0123456789") != "" {
		return nil, fmt.Errorf("%w: the %s amount %q is not an amount (write 120 or 12.50)", toolplane.ErrInvalid, name, s)
	}
	var f int64
	if frac != "" {
		f, _ = strconv.ParseInt((frac + "0")[:2], 10, 64)
	}
	v := w*100 + f
	return &v, nil
}

// listQuery answers the query of the list in status with the filter's
// canonical query fq, and more parameters after.
func listQuery(status toolplane.ApprovalStatus, fq string, more url.Values) string {
	q := "status=" + url.QueryEscape(string(status))
	if fq != "" {
		q += "&" + fq
	}
	if len(more) > 0 {
		q += "&" + more.Encode()
	}
	return q
}

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
	lf, f, fq, err := parseFilter(q, c.cfg.Now())
	if err != nil {
		return err
	}
	// A person who may answer approvals is shown theirs; one who may only
	// read them (an auditor) every pending one, as the history shows the
	// other states. The services decide either way, and read only what
	// the filter matches.
	list := func(ctx context.Context, after string, limit int, by *toolplane.Credential) ([]toolplane.Approval, string, error) {
		return svc.RecentMatching(ctx, status, f, after, limit, by)
	}
	title, inbox := "Approvals "+string(status), false
	if status == toolplane.ApprovalPending && approval.MayAnswer(sess.Credential) == nil {
		title, inbox = "Approvals waiting for you", true
		list = func(ctx context.Context, after string, limit int, by *toolplane.Credential) ([]toolplane.Approval, string, error) {
			return svc.InboxMatching(ctx, f, after, limit, by)
		}
	}
	as, next, err := list(r.Context(), q.Get("cursor"), pageSize, sess.Credential)
	if err != nil {
		return err
	}
	v := listPage{frame: c.frameFor(sess, title, "approvals"), Status: status, F: lf, Query: fq, Ages: ages,
		Filtered: fq != "", Narrowed: lf != (listFilter{Q: lf.Q}), CSRF: sess.CSRF}
	for _, st := range statuses {
		v.Tabs = append(v.Tabs, tab{Status: st, Href: c.path("/approvals") + "?" + listQuery(st, fq, nil)})
	}
	cs := c.costsFor(r.Context(), svc, sess.Credential)
	for i := range as {
		a := &as[i]
		it := listItem{approvalView: c.viewOf(*a, cs)}
		// The inbox holds only what the person may answer (the service
		// judged each); the buttons are offered where one answer decides.
		it.Quick = inbox && a.Approvers <= 1 && len(a.ApprovedBy) == 0
		if a.Status == toolplane.ApprovalApproved {
			if after, err := c.cfg.Invoker.Aftermath(r.Context(), a, sess.Credential); err != nil {
				c.log.ErrorContext(r.Context(), "approval outcome not read", "approval", a.ID, "err", err)
				it.AfterUnread = true
			} else {
				it.After = after
			}
		}
		v.Items = append(v.Items, it)
	}
	if next != "" {
		v.Next = c.path("/approvals") + "?" + listQuery(status, fq, url.Values{"cursor": {next}})
	}
	if done := q.Get("done"); approvalID(done) {
		// Only an approval's id is named back: a link crafted with any
		// other text in it shows no notice, not the text.
		v.Notice = "Your answer to " + done + " was recorded."
	}
	c.render(w, r, http.StatusOK, "approvals", v)
	return nil
}

// confirmPage asks a person to confirm a decision sent from the list:
// the step that stands between a button in a list and an answer, when
// no script asked already.
type confirmPage struct {
	frame
	A        approvalView
	Decision string
	Action   string
	CSRF     string
	// Back is the list's filter query the answer brings the person back
	// to; Cancel the list's address.
	Back, Cancel string
}

// confirmDecision answers the confirmation page of a decision sent from
// the list. It decides nothing: the answer is the confirmation's own
// POST, to the approval's decision, whose service applies every rule.
// An approval the person may not answer is refused here already, in
// the service's words.
func (c *Console) confirmDecision(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.approvals()
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := toolplane.CheckLen("approval id", id, toolplane.MaxRefLen); err != nil {
		return err
	}
	decision := r.PostFormValue("decision")
	if decision != "approve" && decision != "reject" {
		return fmt.Errorf("%w: the decision is approve or reject", toolplane.ErrInvalid)
	}
	back, err := backQuery(r.PostFormValue("back"), c.cfg.Now())
	if err != nil {
		return err
	}
	a, err := svc.Get(r.Context(), id, sess.Credential)
	if err != nil {
		return err
	}
	if a.Status != toolplane.ApprovalPending {
		return fmt.Errorf("%w (it is %s)", approval.ErrNotPending, a.Status)
	}
	if err := approval.MayDecide(sess.Credential, a); err != nil {
		return err
	}
	verb := "Approve"
	if decision == "reject" {
		verb = "Reject"
	}
	v := confirmPage{frame: c.frameFor(sess, verb+" "+a.Tool+"?", "approvals"), A: c.viewOf(*a, c.costsFor(r.Context(), svc, sess.Credential)),
		Decision: decision, Action: c.path("/approvals/" + url.PathEscape(a.ID)), CSRF: sess.CSRF, Back: back,
		Cancel: c.path("/approvals") + "?" + listQuery(toolplane.ApprovalPending, back, nil)}
	c.render(w, r, http.StatusOK, "approval-confirm", v)
	return nil
}

// backQuery answers the list's filter query a decision sent from the
// list carries, as parseFilter writes it: only its own parameters, so
// the address the answer brings the person back to is always the list.
func backQuery(back string, now time.Time) (string, error) {
	q, err := url.ParseQuery(back)
	if err != nil {
		return "", fmt.Errorf("%w: the list's address is not one", toolplane.ErrInvalid)
	}
	_, _, fq, err := parseFilter(q, now)
	return fq, err
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
	// After is what became of the call an approved approval let through
	// (nil otherwise); AfterUnread says it could not be read; AuditLink
	// is the console's page of the audit event of the call that ran.
	After       *invoke.Aftermath
	AfterUnread bool
	AuditLink   string
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
	v := cardPage{frame: c.frameFor(sess, "Approval "+a.ID, "approvals"), A: c.viewOf(*a, c.costsFor(r.Context(), svc, sess.Credential)), CSRF: sess.CSRF,
		Action: c.path("/approvals/" + url.PathEscape(a.ID))}
	if a.Status == toolplane.ApprovalPending {
		if err := approval.MayDecide(sess.Credential, a); err != nil {
			v.Why = problem(err).Message
		} else {
			v.Decide = true
		}
	}
	if token := r.URL.Query().Get("link"); token != "" && c.cfg.Links != nil && v.Decide {
		if err := c.cfg.Links.Check(token, a.ID); err != nil {
			v.LinkRefused = "The link you followed is not valid any more (it expired, or is not for this approval). You can still answer here."
		} else {
			v.Link = token
		}
	}
	if done := r.URL.Query().Get("done"); done != "" {
		v.Notice = "Your answer was recorded."
	}
	// What the approval led to: a card worth showing without it, so a
	// read that fails is said on the card rather than failing the page.
	if after, err := c.cfg.Invoker.Aftermath(r.Context(), a, sess.Credential); err != nil {
		c.log.ErrorContext(r.Context(), "approval outcome not read", "approval", a.ID, "err", err)
		v.AfterUnread = true
	} else if after != nil {
		v.After = after
		if after.AuditID != "" {
			v.AuditLink = c.path("/audit/" + url.PathEscape(after.AuditID))
		}
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
	if _, fromList := r.PostForm["back"]; fromList {
		// Sent from the list (confirmed on its page, or by the script):
		// the person goes back to the list they answered from.
		back, err := backQuery(r.PostFormValue("back"), c.cfg.Now())
		if err != nil {
			back = ""
		}
		http.Redirect(w, r, c.path("/approvals")+"?"+listQuery(toolplane.ApprovalPending, back, url.Values{"done": {a.ID}}), http.StatusSeeOther)
		return nil
	}
	http.Redirect(w, r, c.path("/approvals/"+url.PathEscape(a.ID))+"?done=1", http.StatusSeeOther)
	return nil
}

// approvalID reports whether s has the form of an approval's id (apr_ and
// lower-case letters and digits), as the notice after an answer names it.
func approvalID(s string) bool {
	rest, ok := strings.CutPrefix(s, "apr_")
	if !ok || rest == "" || len(s) > toolplane.MaxRefLen {
		return false
	}
	for _, r := range rest {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}
