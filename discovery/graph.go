package discovery

import (
	"sort"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/semver"
)

// Graph is the dependency graph around one tool: what must run before it
// (requires_output_of, followed as far as it goes), what runs after it
// (the tools requiring its output, likewise), and what is usually called
// beside it (commonly_paired_with, either way round). Only tools the
// caller may call are in it: an edge to any other is left out, as if the
// tool did not exist.
type Graph struct {
	Tool string `json:"tool"`
	// Nodes are the tools of the graph, the root first, then by name.
	Nodes []GraphNode `json:"nodes"`
	// Edges run from a tool to the one it names: From requires the
	// output of To, or From is commonly paired with To.
	Edges []GraphEdge `json:"edges"`
	// Before lists the tools to call before Tool, in an order that
	// runs each after those it requires (farthest first).
	Before []string `json:"before,omitempty"`
	// After lists the tools that take Tool's output, nearest first.
	After []string `json:"after,omitempty"`
	// PairsWith lists the tools usually called beside Tool.
	PairsWith []string `json:"commonly_paired_with,omitempty"`
}

// GraphNode is one tool of a graph.
type GraphNode struct {
	Name    string                 `json:"name"`
	Model   string                 `json:"model_name"`
	Version string                 `json:"version"`
	Summary string                 `json:"summary"`
	Effect  toolplane.Effect       `json:"effect"`
	State   toolplane.VersionState `json:"state"`
}

// GraphEdge is one dependency between two tools of a graph.
type GraphEdge struct {
	From     string `json:"from"`
	Relation string `json:"relation"`
	To       string `json:"to"`
}

// maxGraph bounds the tools one graph walks: a catalogue's edges may be
// many, an answer is not.
const maxGraph = 200

// Dependencies answers the graph around root among candidates (the tools
// the caller may call; root is one of them).
func Dependencies(root *registry.Tool, candidates []*registry.Tool) *Graph {
	by := make(map[string]*registry.Tool, len(candidates))
	for _, t := range candidates {
		by[t.Def.Name] = t
	}
	// out holds each candidate's edges to other candidates; in the
	// reverse of its requires_output_of edges.
	type edge struct{ rel, to string }
	out := map[string][]edge{}
	in := map[string][]string{}
	for _, t := range candidates {
		for _, d := range t.Def.Dependencies {
			name, rng := semver.SplitRef(d.Tool)
			u, ok := by[name]
			if !ok || name == t.Def.Name || !contains(u, rng) {
				continue
			}
			out[t.Def.Name] = append(out[t.Def.Name], edge{d.Relation, name})
			if d.Relation == toolplane.RequiresOutputOf {
				in[name] = append(in[name], t.Def.Name)
			}
		}
	}
	g := &Graph{Tool: root.Def.Name, Edges: []GraphEdge{}}
	nodes := map[string]bool{root.Def.Name: true}
	edges := map[GraphEdge]bool{}
	addEdge := func(e GraphEdge) {
		if !edges[e] {
			edges[e] = true
			g.Edges = append(g.Edges, e)
		}
	}
	// Before: depth-first over requires_output_of, each tool after those
	// it requires.
	seen := map[string]bool{root.Def.Name: true}
	var before func(name string)
	before = func(name string) {
		for _, e := range out[name] {
			if e.rel != toolplane.RequiresOutputOf {
				continue
			}
			addEdge(GraphEdge{From: name, Relation: e.rel, To: e.to})
			if seen[e.to] || len(nodes) >= maxGraph {
				continue
			}
			seen[e.to] = true
			nodes[e.to] = true
			before(e.to)
			g.Before = append(g.Before, e.to)
		}
	}
	before(root.Def.Name)
	// After: breadth-first over the reverse edges.
	queue := []string{root.Def.Name}
	after := map[string]bool{root.Def.Name: true}
	for len(queue) > 0 && len(nodes) < maxGraph {
		name := queue[0]
		queue = queue[1:]
		for _, from := range in[name] {
			if !after[from] && len(nodes) >= maxGraph {
				break
			}
			addEdge(GraphEdge{From: from, Relation: toolplane.RequiresOutputOf, To: name})
			if after[from] {
				continue
			}
			after[from] = true
			nodes[from] = true
			g.After = append(g.After, from)
			queue = append(queue, from)
		}
	}
	// PairsWith: the root's pairings, either way round.
	pairs := map[string]bool{}
	for _, e := range out[root.Def.Name] {
		if e.rel == toolplane.CommonlyPairedWith {
			pairs[e.to] = true
			addEdge(GraphEdge{From: root.Def.Name, Relation: e.rel, To: e.to})
		}
	}
	for from, es := range out {
		for _, e := range es {
			if e.rel == toolplane.CommonlyPairedWith && e.to == root.Def.Name {
				pairs[from] = true
				addEdge(GraphEdge{From: from, Relation: e.rel, To: e.to})
			}
		}
	}
	for p := range pairs {
		nodes[p] = true
		g.PairsWith = append(g.PairsWith, p)
	}
	// Edges only between the graph's nodes (a bound may have left some
	// out).
	kept := g.Edges[:0]
	for _, e := range g.Edges {
		if nodes[e.From] && nodes[e.To] {
			kept = append(kept, e)
		}
	}
	g.Edges = kept
	sort.Strings(g.PairsWith)
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		if n != root.Def.Name {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range append([]string{root.Def.Name}, names...) {
		t := by[n]
		if t == nil {
			t = root
		}
		g.Nodes = append(g.Nodes, GraphNode{Name: t.Def.Name, Model: t.Model, Version: t.Def.Version, Summary: oneLine(t.Def.Description), Effect: t.Def.Effect, State: t.State})
	}
	sort.Slice(g.Edges, func(i, j int) bool {
		a, b := g.Edges[i], g.Edges[j]
		if a.From != b.From {
			return a.From < b.From
		}
		if a.Relation != b.Relation {
			return a.Relation < b.Relation
		}
		return a.To < b.To
	})
	return g
}
