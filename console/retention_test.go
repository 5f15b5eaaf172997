package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/console"
)

// mintIn stores a person's key of subject with roles in organization
// orgID, under name in the world's keys, for a browser to sign in with.
func (w *world) mintIn(orgID, name, subject string, roles ...string) *toolplane.Credential {
	w.t.Helper()
	id, sec, err := apikey.New(toolplane.CredentialPerson)
	if err != nil {
		w.t.Fatal(err)
	}
	c := &toolplane.Credential{ID: id, OrganizationID: orgID, Kind: toolplane.CredentialPerson, Subject: subject, Roles: roles,
		Hash: apikey.Hash(sec), CreatedAt: time.Now()}
	if err := w.store.InsertCredential(context.Background(), c); err != nil {
		w.t.Fatal(err)
	}
	w.keys[name] = apikey.Key(id, sec)
	return c
}

// oldEvents appends n events to orgID's trail, created days ago (older
// than PostgreSQL's retention floor), and answers the time after them.
func (w *world) oldEvents(orgID string, n int) time.Time {
	w.t.Helper()
	start := time.Now().UTC().Add(-30 * 24 * time.Hour).Truncate(time.Hour)
	for i := range n {
		e := &toolplane.AuditEvent{ID: toolplane.NewID("aud_"), OrganizationID: orgID, Tool: "xss.pay", Outcome: "ok",
			CreatedAt: start.Add(time.Duration(i) * time.Hour)}
		if err := w.store.AppendAudit(context.Background(), e); err != nil {
			w.t.Fatal(err)
		}
	}
	return start.Add(time.Duration(n) * time.Hour)
}

// firstStored answers the lowest sequence number of orgID's stored chain.
func (w *world) firstStored(orgID string) int64 {
	w.t.Helper()
	_, first, err := w.store.(toolplane.AuditChainStore).AuditHead(context.Background(), orgID)
	if err != nil {
		w.t.Fatal(err)
	}
	return first
}

// The purges page lists the organization's purges to a platform admin
// and acts through the purge service: one admin proposes from the page,
// their own confirmation is refused in the service's words, another admin
// confirms and the range is dropped (the chain still verifies); a purge
// whose confirming node stopped before the drop is finished from its
// button. An auditor is refused the page and the action; a form without
// the page's token changes nothing; another organization's purge is
// never shown and not found.
func TestAuditPurgesPage(t *testing.T) {
	t.Parallel()
	for _, backend := range backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			w := newWorldOn(t, backend)
			ctx := context.Background()
			cutoff := w.oldEvents(org, 3)
			w.oldEvents(other, 3)
			w.mintIn(org, "joan", "joan", toolplane.RolePlatformAdmin)
			theirAdmin := w.mintIn(other, "theirs", "subject-theirs", toolplane.RolePlatformAdmin)
			theirs, err := w.purges.Propose(ctx, cutoff, theirAdmin)
			if err != nil {
				t.Fatal(err)
			}

			root := w.browser()
			root.signIn("root")
			p := root.get(console.Path + "/audit/purges")
			wantHeaders(t, "purges", p)
			if p.status != http.StatusOK || !strings.Contains(p.body, "Propose a purge") || !strings.Contains(p.body, "No purge was proposed") {
				t.Fatalf("the empty purges page: %d %s", p.status, p.body)
			}
			if trail := root.get(console.Path + "/audit"); !strings.Contains(trail.body, `href="/console/audit/purges"`) || !strings.Contains(trail.body, `href="/console/audit/sinks"`) {
				t.Fatalf("the audit trail links no purges or sinks: %s", trail.body)
			}
			before := cutoff.Format("2006-01-02T15:04")
			if f := root.post(console.Path+"/audit/purges", w.base, url.Values{"action": {"propose"}, "before": {before}}); f.status != http.StatusForbidden {
				t.Fatalf("a proposal without the page's token: %d", f.status)
			}
			f := root.post(console.Path+"/audit/purges", w.base, url.Values{"csrf": {p.csrf(t)}, "action": {"propose"}, "before": {before}})
			loc, _ := url.Parse(f.header.Get("Location"))
			if f.status != http.StatusSeeOther || loc == nil || loc.Path != console.Path+"/audit/purges" || loc.Query().Get("done") != "proposed" {
				t.Fatalf("propose: %d %s", f.status, f.header.Get("Location"))
			}
			id := loc.Query().Get("id")
			p = root.get(loc.String())
			if !strings.Contains(p.body, id) || !strings.Contains(p.body, "waiting for another platform admin") || strings.Contains(p.body, "Confirm and drop") {
				t.Fatalf("the proposer's page: %s", p.body)
			}
			for _, s := range []string{theirs.ID, other, "subject-theirs"} {
				if strings.Contains(p.body, s) {
					t.Fatalf("the page shows %q of the other organization", s)
				}
			}
			// The page offers the proposer no confirmation; the service
			// refuses it sent anyway.
			own := root.post(console.Path+"/audit/purges", w.base, url.Values{"csrf": {p.csrf(t)}, "action": {"confirm"}, "id": {id}})
			if own.status != http.StatusForbidden || !strings.Contains(own.body, "another platform admin than its proposer") {
				t.Fatalf("the proposer's own confirmation: %d %s", own.status, own.body)
			}

			grace := w.browser()
			grace.signIn("grace")
			if g := grace.get(console.Path + "/audit/purges"); g.status != http.StatusForbidden || strings.Contains(g.body, id) {
				t.Fatalf("an auditor's purges page: %d %s", g.status, g.body)
			}
			trail := grace.get(console.Path + "/audit")
			if g := grace.post(console.Path+"/audit/purges", w.base, url.Values{"csrf": {trail.csrf(t)}, "action": {"confirm"}, "id": {id}}); g.status != http.StatusForbidden {
				t.Fatalf("an auditor's confirmation: %d %s", g.status, g.body)
			}

			joan := w.browser()
			joan.signIn("joan")
			j := joan.get(console.Path + "/audit/purges")
			if !strings.Contains(j.body, "Confirm and drop") {
				t.Fatalf("another admin's page offers no confirmation: %s", j.body)
			}
			if x := joan.post(console.Path+"/audit/purges", w.base, url.Values{"csrf": {j.csrf(t)}, "action": {"confirm"}, "id": {theirs.ID}}); x.status != http.StatusNotFound {
				t.Fatalf("confirming another organization's purge: %d", x.status)
			}
			if w.firstStored(org) != 1 {
				t.Fatal("a refused confirmation dropped events")
			}
			done := joan.post(console.Path+"/audit/purges", w.base, url.Values{"csrf": {j.csrf(t)}, "action": {"confirm"}, "id": {id}})
			if done.status != http.StatusSeeOther || !strings.Contains(done.header.Get("Location"), "done=dropped") {
				t.Fatalf("another admin's confirmation: %d %s %s", done.status, done.header.Get("Location"), done.body)
			}
			if first := w.firstStored(org); first != 4 {
				t.Fatalf("after the confirmation the first stored event is %d; want 4", first)
			}
			if first := w.firstStored(other); first != 1 {
				t.Fatalf("the other organization's events were dropped: its first stored is %d", first)
			}
			if r, err := auditchain.VerifyStore(ctx, w.store.(toolplane.AuditChainStore), w.auditKeys, org, 0, 0); err != nil || !r.OK {
				t.Fatalf("verify after the purge = %+v, %v", r, err)
			}
			j = joan.get(done.header.Get("Location"))
			if !strings.Contains(j.body, "is done") || !strings.Contains(j.body, `"Status">done</td>`) || !strings.Contains(j.body, "by joan") || strings.Contains(j.body, "Confirm and drop") {
				t.Fatalf("the page after the purge: %s", j.body)
			}

			// A purge whose confirming node stopped before the drop.
			stopped, err := w.purges.Propose(ctx, cutoff.Add(time.Hour), w.credential("root"))
			if err != nil {
				t.Fatal(err)
			}
			joanCred := w.credential("joan")
			at := time.Now()
			if ok, err := w.store.(audit.PurgeStore).ConfirmAuditPurge(ctx, org, stopped.ID, "joan", at,
				toolplane.ControlEvent(joanCred, toolplane.AuditRetention, "confirmed", stopped.ID, at)); err != nil || !ok {
				t.Fatalf("ConfirmAuditPurge = %v, %v", ok, err)
			}
			p = root.get(console.Path + "/audit/purges")
			if !strings.Contains(p.body, `"Status">confirmed</td>`) || !strings.Contains(p.body, "Finish the drop") {
				t.Fatalf("the page shows no unfinished purge: %s", p.body)
			}
			resumed := root.post(console.Path+"/audit/purges", w.base, url.Values{"csrf": {p.csrf(t)}, "action": {"resume"}, "id": {stopped.ID}})
			if resumed.status != http.StatusSeeOther || !strings.Contains(resumed.header.Get("Location"), "done=dropped") {
				t.Fatalf("finishing the drop: %d %s", resumed.status, resumed.body)
			}
			if got, err := w.store.(audit.PurgeStore).GetAuditPurge(ctx, org, stopped.ID); err != nil || got.DoneAt.IsZero() {
				t.Fatalf("the purge after its drop was finished = %+v, %v", got, err)
			}
			again := root.post(console.Path+"/audit/purges", w.base, url.Values{"csrf": {p.csrf(t)}, "action": {"resume"}, "id": {stopped.ID}})
			if again.status != http.StatusConflict || !strings.Contains(again.body, "the purge is done") {
				t.Fatalf("finishing a done purge: %d %s", again.status, again.body)
			}
		})
	}
}

// credential answers the stored credential of the world's key name.
func (w *world) credential(name string) *toolplane.Credential {
	w.t.Helper()
	id, _, err := apikey.Parse(w.keys[name])
	if err != nil {
		w.t.Fatal(err)
	}
	c, err := w.store.GetCredential(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// The sinks page lists the registered sinks with what of the
// organization's events waits for each (never another organization's
// count) to an auditor, with no drop; dropping a sink is the operator's,
// so an organization's platform admin is offered none and refused one.
// An approver is refused the page, an auditor the drop, and a form
// without the page's token changes nothing.
func TestAuditSinksPage(t *testing.T) {
	t.Parallel()
	for _, backend := range backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			w := newWorldOn(t, backend)
			ctx := context.Background()
			outbox := w.store.(toolplane.AuditOutboxStore)
			if err := outbox.RegisterAuditSink(ctx, "shared-sink", time.Now()); err != nil {
				t.Fatal(err)
			}
			w.oldEvents(other, 5)
			if err := outbox.RegisterAuditSink(ctx, "solo-sink", time.Now()); err != nil {
				t.Fatal(err)
			}
			w.oldEvents(org, 2)

			grace := w.browser()
			grace.signIn("grace")
			g := grace.get(console.Path + "/audit/sinks")
			wantHeaders(t, "sinks", g)
			if g.status != http.StatusOK || !strings.Contains(g.body, "shared-sink") || !strings.Contains(g.body, "solo-sink") || strings.Contains(g.body, ">Drop<") {
				t.Fatalf("the auditor's sinks page: %d %s", g.status, g.body)
			}
			if strings.Contains(g.body, `waiting">7</td>`) || strings.Contains(g.body, `waiting">5</td>`) || strings.Count(g.body, `waiting">2</td>`) != 2 {
				t.Fatalf("the page does not count the organization's own waiting events alone: %s", g.body)
			}
			if f := grace.post(console.Path+"/audit/sinks/drop", w.base, url.Values{"csrf": {g.csrf(t)}, "name": {"solo-sink"}}); f.status != http.StatusForbidden {
				t.Fatalf("an auditor's drop: %d", f.status)
			}
			fin := w.browser()
			fin.signIn("fin")
			if f := fin.get(console.Path + "/audit/sinks"); f.status != http.StatusForbidden || strings.Contains(f.body, "solo-sink") {
				t.Fatalf("an approver's sinks page: %d", f.status)
			}

			// A sink serves every organization: an organization's platform
			// admin is not the operator, offered no drop, and refused one.
			root := w.browser()
			root.signIn("root")
			p := root.get(console.Path + "/audit/sinks")
			if p.status != http.StatusOK || strings.Contains(p.body, ">Drop<") || !strings.Contains(p.body, "only the operator") {
				t.Fatalf("an organization's platform admin's page: %d %s", p.status, p.body)
			}
			if f := root.post(console.Path+"/audit/sinks/drop", w.base, url.Values{"csrf": {p.csrf(t)}, "name": {"solo-sink"}}); f.status != http.StatusForbidden ||
				!strings.Contains(f.body, "operator") {
				t.Fatalf("an organization's platform admin's drop: %d %s", f.status, f.body)
			}
			if f := root.post(console.Path+"/audit/sinks/drop", w.base, url.Values{"name": {"solo-sink"}}); f.status != http.StatusForbidden {
				t.Fatalf("a drop without the page's token: %d", f.status)
			}
			sinks, err := outbox.AuditSinks(ctx)
			if err != nil || len(sinks) != 2 {
				t.Fatalf("the sinks after the refused drops = %+v, %v", sinks, err)
			}
			if lag, err := outbox.AuditOutboxLag(ctx, "solo-sink", nil); err != nil || lag.Pending < 2 {
				t.Fatalf("the sink's queue after the refused drops = %+v, %v", lag, err)
			}
		})
	}
}
