package console

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/resilience"
	"github.com/toolplane/toolplane/signin"
	"github.com/toolplane/toolplane/upstream"
)

func (c *Console) upstreamRoutes(mux *http.ServeMux) {
	mux.Handle("GET "+Path+"/upstreams", c.page(c.upstreamList))
	mux.Handle("GET "+Path+"/upstreams/{slug}", c.page(c.upstreamPage))
}

// upstreams answers the upstream servers' settings service, or that this
// server fronts no upstream MCP server.
func (c *Console) upstreams() (*upstream.Settings, error) {
	if c.cfg.Upstreams == nil {
		return nil, fmt.Errorf("%w: this server fronts no upstream MCP server", toolplane.ErrNotFound)
	}
	return c.cfg.Upstreams, nil
}

// mayUpstreams answers nil when the upstream servers' page would answer
// by: this server fronts upstream MCP servers and by is their operator. A
// navigation asks it before it offers the section.
func (c *Console) mayUpstreams(by *toolplane.Credential) error {
	svc, err := c.upstreams()
	if err != nil {
		return err
	}
	return svc.MayRead(by)
}

// upstreamView is one server as a page shows it: its status and its
// health in a word.
type upstreamView struct {
	upstream.Status
	// Health is connected, failing or not connected; Class its style.
	Health, Class string
	Drift         int
	// Breakers are its tools' circuit breakers that are not closed, in
	// the viewer's organization.
	Breakers []breakerView
	// Rows are its tools as the page lists them.
	Rows []toolRow
}

// toolRow is one tool of an upstream, with its hashes shortened to what
// tells two contracts apart at a glance (the whole one in a title).
type toolRow struct {
	upstream.ToolStatus
	Hash, First string
}

// breakerView is one breaker of an upstream tool that is open or half
// open.
type breakerView struct {
	Tool, State       string
	Failures, Samples int
	NextProbe         string
}

// upstreamView answers what a page shows of st to a person of org.
func (c *Console) upstreamView(st upstream.Status, org string) upstreamView {
	v := upstreamView{Status: st, Drift: st.Drifted()}
	for _, t := range st.Tools {
		v.Rows = append(v.Rows, toolRow{ToolStatus: t, Hash: shortHash(t.SchemaHash), First: shortHash(t.FirstHash)})
	}
	switch {
	case st.LastError != "":
		v.Health, v.Class = "failing", "state-revoked"
	case st.Connected:
		v.Health, v.Class = "connected", "state-ok"
	default:
		v.Health, v.Class = "not connected", "state-expired"
	}
	if c.cfg.Breakers != nil {
		target := "upstream:" + st.Slug
		for _, t := range st.Tools {
			for _, b := range c.cfg.Breakers.Breakers(org, t.Name) {
				if b.Target != target || b.State == resilience.Closed {
					continue
				}
				bv := breakerView{Tool: t.Name, State: b.State.String(), Failures: b.Failures, Samples: b.Samples}
				if !b.NextProbe.IsZero() {
					bv.NextProbe = b.NextProbe.UTC().Format("2006-01-02 15:04:05 UTC")
				}
				v.Breakers = append(v.Breakers, bv)
			}
		}
		if len(v.Breakers) > 0 && v.Health == "connected" {
			v.Health, v.Class = "breaker open", "state-reauth"
		}
	}
	return v
}

type upstreamsPage struct {
	frame
	Items []upstreamView
}

// upstreamList shows the upstream MCP servers the deployment fronts, to
// its operator (the settings service decides who that is).
func (c *Console) upstreamList(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.upstreams()
	if err != nil {
		return err
	}
	all, err := svc.Statuses(r.Context(), sess.Credential)
	if err != nil {
		return err
	}
	v := upstreamsPage{frame: c.frameFor(sess, "Upstream servers", "upstreams")}
	for _, st := range all {
		v.Items = append(v.Items, c.upstreamView(st, sess.Credential.OrganizationID))
	}
	c.render(w, r, http.StatusOK, "upstreams", v)
	return nil
}

type upstreamPage struct {
	frame
	U upstreamView
}

// upstreamPage shows one server: its health, the tools it serves with
// their contracts and drift, and what each tool's calls are decided under.
func (c *Console) upstreamPage(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	svc, err := c.upstreams()
	if err != nil {
		return err
	}
	slug := r.PathValue("slug")
	if err := toolplane.CheckLen("upstream", slug, toolplane.MaxRefLen); err != nil {
		return err
	}
	st, err := svc.Status(r.Context(), sess.Credential, slug)
	if err != nil {
		return err
	}
	v := upstreamPage{frame: c.frameFor(sess, "Upstream server "+st.Slug, "upstreams"), U: c.upstreamView(*st, sess.Credential.OrganizationID)}
	c.render(w, r, http.StatusOK, "upstream", v)
	return nil
}

// shortHash answers the first characters of a schema hash: enough to
// tell two contracts apart at a glance, the whole one in its title.
func shortHash(h string) string {
	h = strings.TrimPrefix(h, "sha256:")
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
