package console

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/rules"
	"github.com/toolplane/toolplane/signin"
)

func (c *Console) policyRoutes(mux *http.ServeMux) {
	mux.Handle("GET "+Path+"/policy", c.page(c.policyList))
	mux.Handle("GET "+Path+"/policy/{version}", c.page(c.policyVersion))
	mux.Handle("POST "+Path+"/policy/{version}/shadow", c.action(c.policyShadow))
	mux.Handle("POST "+Path+"/policy/{version}/rollback", c.action(c.policyRollback))
}

// policyPageSize is how many versions a page of the list shows.
const policyPageSize = 50

// rules answers the rules service, or that this server serves none.
func (c *Console) rules() (*rules.Service, error) {
	if c.cfg.Rules == nil {
		return nil, fmt.Errorf("%w: policy bundles are not enabled on this server", toolplane.ErrNotFound)
	}
	return c.cfg.Rules, nil
}

// policyRow is a version as the list shows it.
type policyRow struct {
	toolplane.PolicyBundle
	// InForce marks the latest version: the one every call is decided by.
	InForce bool
	// SameAs is an older version on the same page with the same rules
	// (the same digest): what a rollback, or publishing the same files
	// again, makes. 0 when none.
	SameAs int64
}

type policyListPage struct {
	frame
	Versions []policyRow
	Next     string
}

func (c *Console) policyList(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.rules()
	if err != nil {
		return err
	}
	var before int64
	if s := r.URL.Query().Get("before"); s != "" {
		if before, err = strconv.ParseInt(s, 10, 64); err != nil || before < 1 {
			return fmt.Errorf("%w: before is a version number", toolplane.ErrInvalid)
		}
	}
	list, err := svc.List(r.Context(), before, policyPageSize, sess.Credential)
	if err != nil {
		return err
	}
	v := policyListPage{frame: c.frameFor(sess, "Policy bundles", "policy")}
	if done := r.URL.Query().Get("done"); done != "" {
		if n, err := strconv.ParseInt(done, 10, 64); err == nil {
			v.Notice = fmt.Sprintf("Done: version %d is in force.", n)
		}
	}
	for i, b := range list {
		row := policyRow{PolicyBundle: b, InForce: before == 0 && i == 0}
		for _, older := range list[i+1:] {
			if !b.Disabled && !older.Disabled && older.Digest == b.Digest {
				row.SameAs = older.Version
				break
			}
		}
		v.Versions = append(v.Versions, row)
	}
	if len(list) == policyPageSize {
		v.Next = c.path(fmt.Sprintf("/policy?before=%d", list[len(list)-1].Version))
	}
	c.render(w, r, http.StatusOK, "policy", v)
	return nil
}

// fileDiff is one file of a version against the version before it.
type fileDiff struct {
	Name string
	// Change is "added", "removed", "changed" or "unchanged".
	Change string
	Lines  []diffLine
	// Added and Removed count the lines.
	Added, Removed int
}

// policyFile is one file of a version, in name order.
type policyFile struct{ Name, Content string }

type policyVersionPage struct {
	frame
	Bundle  *toolplane.PolicyBundle
	InForce bool
	Files   []policyFile
	// Prev is the version the diff is against, 0 for the first version.
	Prev  int64
	Diffs []fileDiff
	// Tests are the version's own tests, run now by this server's
	// engines; TestsError says why they could not run (the rules no
	// longer compile). Passed and Failed count them.
	Tests          []policy.TestResult
	TestsError     string
	Passed, Failed int
	// Shadow is a shadow run's report of this version over the last
	// ShadowDays days, when one was asked for.
	Shadow     *rules.ShadowReport
	ShadowDays int
	// MayShadow and MayRollback offer the forms (rules.MayShadow,
	// rules.MayPublish); the service decides again on each.
	MayShadow, MayRollback bool
	ShadowAction           string
	RollbackAction         string
	CSRF                   string
}

// defaultShadowDays is how far back the shadow form reaches unless told.
const defaultShadowDays = 7

// policyVersionOf answers the page of the version the request names,
// everything but a shadow run filled in.
func (c *Console) policyVersionOf(r *http.Request, sess *signin.Session) (*policyVersionPage, error) {
	svc, err := c.rules()
	if err != nil {
		return nil, err
	}
	version, err := strconv.ParseInt(r.PathValue("version"), 10, 64)
	if err != nil || version < 1 {
		return nil, fmt.Errorf("%w: no such version: a version is a number from 1", toolplane.ErrNotFound)
	}
	ctx := r.Context()
	b, err := svc.Show(ctx, version, sess.Credential)
	if err != nil {
		return nil, err
	}
	latest, err := svc.List(ctx, 0, 1, sess.Credential)
	if err != nil {
		return nil, err
	}
	v := &policyVersionPage{frame: c.frameFor(sess, fmt.Sprintf("Policy bundle version %d", b.Version), "policy"), Bundle: b,
		InForce: len(latest) > 0 && latest[0].Version == b.Version, ShadowDays: defaultShadowDays, CSRF: sess.CSRF,
		ShadowAction:   c.path(fmt.Sprintf("/policy/%d/shadow", b.Version)),
		RollbackAction: c.path(fmt.Sprintf("/policy/%d/rollback", b.Version)),
		MayShadow:      !b.Disabled && rules.MayShadow(sess.Credential) == nil}
	v.MayRollback = !v.InForce && rules.MayPublish(sess.Credential) == nil
	for _, name := range sortedNames(b.Files) {
		v.Files = append(v.Files, policyFile{Name: name, Content: b.Files[name]})
	}
	var before map[string]string
	if b.Version > 1 {
		prev, err := svc.Show(ctx, b.Version-1, sess.Credential)
		switch {
		case errors.Is(err, toolplane.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			v.Prev, before = prev.Version, prev.Files
		}
	}
	v.Diffs = bundleDiff(before, b.Files)
	if !b.Disabled {
		res, err := svc.Test(ctx, b.Files, sess.Credential)
		switch {
		case errors.Is(err, toolplane.ErrInvalid):
			v.TestsError = problem(err).Message
		case err != nil:
			return nil, err
		}
		v.Tests = res
		for _, t := range res {
			if t.Pass {
				v.Passed++
			} else {
				v.Failed++
			}
		}
	}
	return v, nil
}

func (c *Console) policyVersion(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	v, err := c.policyVersionOf(r, sess)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "policy-version", v)
	return nil
}

// policyShadow answers the shadow form: the version replayed against
// the organization's calls of the last days, shown on its page. It
// changes nothing, but it is a POST: a run spends up to the service's run
// budget, which a link followed or prefetched must not.
func (c *Console) policyShadow(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	v, err := c.policyVersionOf(r, sess)
	if err != nil {
		return err
	}
	days, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("days")))
	if err != nil || days < 1 || days > rules.MaxShadowDays {
		return fmt.Errorf("%w: days is a whole number from 1 to %d", toolplane.ErrInvalid, rules.MaxShadowDays)
	}
	since := c.cfg.Now().Add(-time.Duration(days) * 24 * time.Hour)
	rep, err := c.cfg.Rules.Shadow(r.Context(), v.Bundle.Files, since, sess.Credential)
	if err != nil {
		return err
	}
	v.Shadow, v.ShadowDays = rep, days
	c.render(w, r, http.StatusOK, "policy-version", v)
	return nil
}

// policyRollback publishes the version's rules again as the next
// version, as `toolplane policy rollback` does: the service checks the
// role, and tests the rules again.
func (c *Console) policyRollback(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.rules()
	if err != nil {
		return err
	}
	version, err := strconv.ParseInt(r.PathValue("version"), 10, 64)
	if err != nil || version < 1 {
		return fmt.Errorf("%w: no such version: a version is a number from 1", toolplane.ErrNotFound)
	}
	b, err := svc.Rollback(r.Context(), version, strings.TrimSpace(r.PostFormValue("note")), sess.Credential)
	if err != nil {
		return err
	}
	http.Redirect(w, r, c.path(fmt.Sprintf("/policy?done=%d", b.Version)), http.StatusSeeOther)
	return nil
}

// bundleDiff answers the files of after against those of before, in
// name order: each added, removed, changed (with its line diff, folded
// to the changes' context) or unchanged.
func bundleDiff(before, after map[string]string) []fileDiff {
	names := sortedNames(before)
	for n := range after {
		if _, ok := before[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	out := make([]fileDiff, 0, len(names))
	for _, n := range names {
		old, had := before[n]
		now, has := after[n]
		d := fileDiff{Name: n}
		switch {
		case !had:
			d.Change = "added"
		case !has:
			d.Change = "removed"
		case old == now:
			d.Change = "unchanged"
			out = append(out, d)
			continue
		default:
			d.Change = "changed"
		}
		lines := lineDiff(old, now)
		for _, l := range lines {
			switch l.Op {
			case diffAdded:
				d.Added++
			case diffRemoved:
				d.Removed++
			}
		}
		d.Lines = folded(lines)
		out = append(out, d)
	}
	return out
}

func sortedNames(files map[string]string) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Unchanged answers the names of the files the same in both versions:
// the page names them in one line rather than a card each.
func (v *policyVersionPage) Unchanged() []string {
	var out []string
	for _, d := range v.Diffs {
		if d.Change == "unchanged" {
			out = append(out, d.Name)
		}
	}
	return out
}
