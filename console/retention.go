package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/signin"
)

// The audit section's retention pages: the purges of the trail (two
// platform admins' drop of a range) and the sinks it is exported to. They
// act through audit.Purges and audit.Sinks, the services the API and the
// command line use, which decide who may do what: the two-admin rule, the
// platform_admin role, a sink other organizations' events wait for.
func (c *Console) retentionRoutes(mux *http.ServeMux) {
	mux.Handle("GET "+Path+"/audit/purges", c.page(c.purgeList))
	mux.Handle("POST "+Path+"/audit/purges", c.action(c.purgeAction))
	mux.Handle("GET "+Path+"/audit/sinks", c.page(c.sinkList))
	mux.Handle("POST "+Path+"/audit/sinks/drop", c.action(c.dropSink))
}

// purges answers the purge service, or that this server purges nothing.
func (c *Console) purges() (*audit.Purges, error) {
	if c.cfg.Purges == nil {
		return nil, fmt.Errorf("%w: this server does not purge its audit trail (no audit chain or signing key)", toolplane.ErrNotFound)
	}
	return c.cfg.Purges, nil
}

// sinks answers the sinks' management, or that this server exports no
// trail.
func (c *Console) sinks() (*audit.Sinks, error) {
	if c.cfg.Sinks == nil {
		return nil, fmt.Errorf("%w: this server's store exports no audit trail", toolplane.ErrNotFound)
	}
	return c.cfg.Sinks, nil
}

// purgeRow is a purge as the page lists it: where it stands now, and
// whether the signed-in person proposed it (their own is confirmed by
// another admin; the service refuses them all the same).
type purgeRow struct {
	toolplane.AuditPurge
	Status toolplane.AuditPurgeStatus
	Own    bool
}

type purgesPage struct {
	frame
	Tab   string
	Items []purgeRow
	// Before is the proposal form's default: the start of today, UTC.
	Before       string
	Action, CSRF string
}

// purgeList shows the organization's purges, newest first, to a platform
// admin (audit.Purges.List), each with who proposed and confirmed it and
// when, its range, and the action its status allows.
func (c *Console) purgeList(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.purges()
	if err != nil {
		return err
	}
	list, err := svc.List(r.Context(), pageSize, sess.Credential)
	if err != nil {
		return err
	}
	now := c.cfg.Now()
	v := purgesPage{frame: c.frameFor(sess, "Audit purges", "audit"), Tab: "purges", Action: c.path("/audit/purges"), CSRF: sess.CSRF,
		Before: now.UTC().Truncate(24 * time.Hour).Format(timeForm)}
	for _, p := range list {
		v.Items = append(v.Items, purgeRow{AuditPurge: p, Status: p.StatusAt(now), Own: p.ProposedBy == sess.Credential.Subject})
	}
	q := r.URL.Query()
	switch id := q.Get("id"); q.Get("done") {
	case "proposed":
		v.Notice = "Purge " + id + " proposed: another platform admin confirms it before it expires."
	case "dropped":
		v.Notice = "Purge " + id + " is done: its range was dropped under a signed checkpoint, and the chain still verifies."
	case "unfinished":
		v.Notice = "Purge " + id + " is confirmed, but its drop did not finish. The purge job finishes it within minutes, or finish it now below."
	}
	c.render(w, r, http.StatusOK, "audit-purges", v)
	return nil
}

// purgeAction proposes a purge, confirms another admin's proposal, or
// finishes a confirmed purge's drop, as the signed-in person.
func (c *Console) purgeAction(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.purges()
	if err != nil {
		return err
	}
	ctx, by := r.Context(), sess.Credential
	id := strings.TrimSpace(r.PostFormValue("id"))
	done := "dropped"
	switch r.PostFormValue("action") {
	case "propose":
		before, perr := time.Parse(timeForm, r.PostFormValue("before"))
		if perr != nil {
			return fmt.Errorf("%w: before is a date and time, YYYY-MM-DDTHH:MM (UTC)", toolplane.ErrInvalid)
		}
		var p *toolplane.AuditPurge
		if p, err = svc.Propose(ctx, before, by); err == nil {
			id, done = p.ID, "proposed"
		}
	case "confirm", "resume":
		if err := toolplane.CheckLen("id", id, toolplane.MaxRefLen); err != nil {
			return err
		}
		if r.PostFormValue("action") == "confirm" {
			_, err = svc.Confirm(ctx, id, by)
		} else {
			_, err = svc.Resume(ctx, id, by)
		}
	default:
		return fmt.Errorf("%w: the action is propose, confirm or resume", toolplane.ErrInvalid)
	}
	if errors.Is(err, audit.ErrDropNotFinished) {
		// The confirmation stands; what failed is logged, and the page
		// says the drop is to finish.
		c.log.WarnContext(ctx, "audit purge drop not finished", "purge", id, "err", err)
		err, done = nil, "unfinished"
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, c.path("/audit/purges")+"?"+url.Values{"done": {done}, "id": {id}}.Encode(), http.StatusSeeOther)
	return nil
}

type sinksPage struct {
	frame
	Tab   string
	Items []audit.SinkInfo
	// Drop is set when the person may drop a sink (audit.MayDropSink,
	// the operator); the service decides again on the action.
	Drop         bool
	Action, CSRF string
}

// sinkList shows the sinks the trail is exported to, with what of the
// organization's events waits for each, to an auditor (audit.Sinks.List).
func (c *Console) sinkList(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	v, err := c.sinksPage(r, sess)
	if err != nil {
		return err
	}
	if name := r.URL.Query().Get("dropped"); name != "" {
		v.Notice = "The sink " + name + " was dropped, and the events waiting for it with it. A node still configured with it registers it again when it starts."
	}
	c.render(w, r, http.StatusOK, "audit-sinks", v)
	return nil
}

func (c *Console) sinksPage(r *http.Request, sess *signin.Session) (sinksPage, error) {
	svc, err := c.sinks()
	if err != nil {
		return sinksPage{}, err
	}
	items, err := svc.List(r.Context(), sess.Credential)
	if err != nil {
		return sinksPage{}, err
	}
	return sinksPage{frame: c.frameFor(sess, "Audit export sinks", "audit"), Tab: "sinks", Items: items,
		Drop: audit.MayDropSink(sess.Credential) == nil, Action: c.path("/audit/sinks/drop"), CSRF: sess.CSRF}, nil
}

// dropSink drops a sink as the signed-in person: the operator's act
// (audit.MayDropSink), refused to anyone else by the service.
func (c *Console) dropSink(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.sinks()
	if err != nil {
		return err
	}
	name := strings.TrimSpace(r.PostFormValue("name"))
	if err := toolplane.CheckLen("name", name, toolplane.MaxRefLen); err != nil {
		return err
	}
	err = svc.Drop(r.Context(), name, sess.Credential)
	if err != nil {
		return err
	}
	http.Redirect(w, r, c.path("/audit/sinks")+"?"+url.Values{"dropped": {name}}.Encode(), http.StatusSeeOther)
	return nil
}
