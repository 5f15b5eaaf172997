package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/resilience"
	"github.com/toolplane/toolplane/signin"
)

func (c *Console) catalogRoutes(mux *http.ServeMux) {
	mux.Handle("GET "+Path+"/catalog", c.page(c.catalogList))
	mux.Handle("GET "+Path+"/catalog/{name}/{version}", c.page(c.catalogVersion))
	mux.Handle("POST "+Path+"/catalog/{name}/{version}", c.action(c.catalogAction))
}

// catalogue answers the catalogue service, or that this server serves
// none.
func (c *Console) catalogue() (*catalog.Service, error) {
	if c.cfg.Catalog == nil {
		return nil, fmt.Errorf("%w: the catalogue is not enabled on this server", toolplane.ErrNotFound)
	}
	return c.cfg.Catalog, nil
}

var versionStates = []toolplane.VersionState{toolplane.StateInReview, toolplane.StatePendingApproval, toolplane.StateActive,
	toolplane.StateDeprecated, toolplane.StateRetired}

type catalogPage struct {
	frame
	Name   string
	State  toolplane.VersionState
	States []toolplane.VersionState
	Items  []toolplane.ToolVersion
	Next   string
	// Search is the search box and, once asked, its answer, which the
	// page shows instead of the versions; nil when the console offers no
	// search.
	Search *toolSearch
}

// Searching reports whether the page answers a search rather than
// listing versions.
func (p catalogPage) Searching() bool { return p.Search != nil && p.Search.Asked }

func (c *Console) catalogList(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.catalogue()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	v := catalogPage{frame: c.frameFor(sess, "Catalogue", "catalog"), Name: strings.TrimSpace(q.Get("name")),
		State: toolplane.VersionState(q.Get("state")), States: versionStates}
	f := toolplane.VersionFilter{Name: v.Name}
	if v.State != "" && !slices.Contains(versionStates, v.State) {
		return fmt.Errorf("%w: no version state %q", toolplane.ErrInvalid, v.State)
	}
	if v.State != "" {
		f.States = []toolplane.VersionState{v.State}
		if v.State == toolplane.StateInReview {
			v.Title = "Review queue"
		}
	}
	if err := toolplane.CheckLen("name", v.Name, toolplane.MaxNameLen); err != nil {
		return err
	}
	if v.Search, err = c.search(r, sess, q); err != nil {
		return err
	}
	if v.Searching() {
		status := http.StatusOK
		if v.Search.Refused != "" {
			status = http.StatusBadRequest
		}
		v.Title = "Catalogue search"
		c.render(w, r, status, "catalog", v)
		return nil
	}
	vs, next, err := svc.List(r.Context(), f, q.Get("cursor"), pageSize, sess.Credential)
	if err != nil {
		return err
	}
	v.Items = vs
	if next != "" {
		more := url.Values{"cursor": {next}}
		if v.Name != "" {
			more.Set("name", v.Name)
		}
		if v.State != "" {
			more.Set("state", string(v.State))
		}
		v.Next = c.path("/catalog") + "?" + more.Encode()
	}
	c.render(w, r, http.StatusOK, "catalog", v)
	return nil
}

type versionPage struct {
	frame
	V *toolplane.ToolVersion
	// Def is the stored definition, indented.
	Def string
	// Against is the version the diff compares from; Diff the report.
	Against string
	Diff    *catalog.Comparison
	// Versions are the tool's other versions, to compare against.
	Versions []string
	// Review, Deprecate and Retire are set when the version's state
	// allows the action; the service decides whether the person may.
	Review, Deprecate, Retire bool
	Action, CSRF              string
	// Health is the tool's traffic on this node (nil when the node's
	// protections are off).
	Health *toolHealth
	// Graph is the tool's dependency graph among the tools the person is
	// shown (nil when the tool is not served, or the console shows no
	// graph).
	Graph *toolGraph
	// Traffic is the tool's calls over the last hour or day, from the
	// audit trail (nil when the console serves no overview, or the person
	// may not read the trail).
	Traffic *trafficView
}

// toolHealth is what this node knows of a tool's traffic: its breakers,
// one per downstream target, and its calls in flight here.
type toolHealth struct {
	InFlight int
	Breakers []resilience.BreakerView
}

func (c *Console) catalogVersion(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.catalogue()
	if err != nil {
		return err
	}
	name, version := r.PathValue("name"), r.PathValue("version")
	if err := toolplane.CheckLen("name", name, toolplane.MaxNameLen); err != nil {
		return err
	}
	if err := toolplane.CheckLen("version", version, toolplane.MaxRefLen); err != nil {
		return err
	}
	tv, err := svc.Get(r.Context(), name, version, sess.Credential)
	if err != nil {
		return err
	}
	v := versionPage{frame: c.frameFor(sess, tv.Name+" "+tv.Version, "catalog"), V: tv, Def: indent(tv.Definition),
		Action: c.path("/catalog/" + url.PathEscape(tv.Name) + "/" + url.PathEscape(tv.Version)), CSRF: sess.CSRF,
		Review: tv.State == toolplane.StateInReview, Deprecate: tv.State == toolplane.StateActive, Retire: tv.State == toolplane.StateDeprecated}
	if tv.Source != toolplane.SourcePublished {
		// The platform's own tools are the operator's: nobody reviews,
		// deprecates or retires them here.
		v.Review, v.Deprecate, v.Retire = false, false, false
	}
	if c.cfg.Invoker.Protected() {
		bs, n := c.cfg.Invoker.Breakers(sess.Credential.OrganizationID, tv.Name)
		v.Health = &toolHealth{InFlight: n, Breakers: bs}
	}
	if v.Graph, err = c.graph(r, sess, tv.Name); err != nil {
		return err
	}
	if v.Traffic, err = c.toolTraffic(r, sess, tv.Name, v.Action); err != nil {
		return err
	}
	others, _, err := svc.List(r.Context(), toolplane.VersionFilter{Name: tv.Name}, "", pageSize, sess.Credential)
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.Version != tv.Version {
			v.Versions = append(v.Versions, o.Version)
		}
	}
	if v.Against = r.URL.Query().Get("against"); v.Against != "" {
		if err := toolplane.CheckLen("against", v.Against, toolplane.MaxRefLen); err != nil {
			return err
		}
		if v.Diff, err = svc.Diff(r.Context(), tv.Name, v.Against, tv.Version, sess.Credential); err != nil {
			return err
		}
	}
	if r.URL.Query().Get("done") != "" {
		v.Notice = "The version is " + string(tv.State) + " now."
	}
	c.render(w, r, http.StatusOK, "catalog-version", v)
	return nil
}

// maxNote bounds a review's note.
const maxNote = 2000

func (c *Console) catalogAction(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.catalogue()
	if err != nil {
		return err
	}
	// As the API: a person who can change no version is refused before
	// the form is read, in the catalogue's words for that.
	if err := catalog.MayChange(sess.Credential); err != nil {
		return err
	}
	ctx, name, version := r.Context(), r.PathValue("name"), r.PathValue("version")
	note := strings.TrimSpace(r.PostFormValue("note"))
	if len(note) > maxNote {
		return fmt.Errorf("%w: the note is longer than %d bytes", toolplane.ErrInvalid, maxNote)
	}
	switch r.PostFormValue("action") {
	case "approve":
		_, err = svc.Review(ctx, name, version, true, note, sess.Credential)
	case "reject":
		_, err = svc.Review(ctx, name, version, false, note, sess.Credential)
	case "deprecate":
		var sunset time.Time
		if s := r.PostFormValue("sunset"); s != "" {
			if sunset, err = time.Parse(timeForm, s); err != nil {
				return fmt.Errorf("%w: the sunset is a date and time, YYYY-MM-DDTHH:MM (UTC)", toolplane.ErrInvalid)
			}
		}
		replacement := strings.TrimSpace(r.PostFormValue("replacement"))
		if err := toolplane.CheckLen("replacement", replacement, toolplane.MaxPatternLen); err != nil {
			return err
		}
		_, err = svc.Deprecate(ctx, name, version, sunset, replacement, note, sess.Credential)
	case "retire":
		_, err = svc.Retire(ctx, name, version, note, sess.Credential)
	default:
		return fmt.Errorf("%w: the action is approve, reject, deprecate or retire", toolplane.ErrInvalid)
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, c.path("/catalog/"+url.PathEscape(name)+"/"+url.PathEscape(version))+"?done=1", http.StatusSeeOther)
	return nil
}
