package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/signin"
)

// The catalogue's search and each tool's dependency graph read what the
// door shows the signed-in person (door.Door.Search, Dependencies), as
// the REST API's /v1/tools/search and /v1/tools/{name}/dependencies do
// for a key.

// effects are the effects the search box filters by.
var effects = []toolplane.Effect{toolplane.EffectRead, toolplane.EffectWrite, toolplane.EffectSend}

// toolSearch is the catalogue page's search: the form's values and, once
// asked, its answer.
type toolSearch struct {
	Q, Tag  string
	Effect  toolplane.Effect
	Effects []toolplane.Effect
	// Asked is set when the form was sent with a query or a filter.
	Asked bool
	// Results is the answer; Refused says why the search was refused
	// instead (a bad filter), in the search's words.
	Results *discovery.Results
	Refused string
}

// searches reports whether the console offers the catalogue's search.
func (c *Console) searches() bool {
	return c.cfg.Door != nil && c.cfg.Door.Discovery != nil
}

// search answers the catalogue page's search for q, nil when the console
// offers none. A refused query (a bad filter) is an answer saying why, so
// the person corrects the form on the page that holds it.
func (c *Console) search(r *http.Request, sess *signin.Session, q url.Values) (*toolSearch, error) {
	if !c.searches() {
		return nil, nil
	}
	s := &toolSearch{Q: strings.TrimSpace(q.Get("q")), Effect: toolplane.Effect(q.Get("effect")), Effects: effects}
	var tags []string
	for _, v := range q["tag"] {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
	}
	s.Tag = strings.Join(tags, ", ")
	s.Asked = s.Q != "" || len(tags) > 0 || s.Effect != ""
	if !s.Asked {
		return s, nil
	}
	res, err := c.cfg.Door.Search(r.Context(), sess.Credential, "", discovery.Query{Text: s.Q, Tags: tags, Effect: s.Effect})
	if errors.Is(err, toolplane.ErrInvalid) {
		s.Refused = problem(err).Message
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	s.Results = res
	return s, nil
}

// toolGraph is a tool page's dependency graph: of the version of the tool
// callers get, which may be another than the page's.
type toolGraph struct {
	*discovery.Graph
	// Versions are the graph's tools' versions, by name, for their links.
	Versions map[string]string
}

// graph answers the dependency graph around the tool named, nil when the
// console shows none or the person is not shown the tool (a version in
// review, or retired: nothing calls it).
func (c *Console) graph(r *http.Request, sess *signin.Session, name string) (*toolGraph, error) {
	if c.cfg.Door == nil {
		return nil, nil
	}
	g, err := c.cfg.Door.Dependencies(r.Context(), sess.Credential, "", name)
	if errors.Is(err, toolplane.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v := &toolGraph{Graph: g, Versions: map[string]string{}}
	for _, n := range g.Nodes {
		v.Versions[n.Name] = n.Version
	}
	return v, nil
}
