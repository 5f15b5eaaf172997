// Package discoveryeval measures tool search: a catalogue of realistic
// tool definitions across many domains, a labelled query set written
// against it, the metrics a search is judged by (recall, MRR, nDCG,
// rejection of queries with no right answer), the up-front tokens of a
// large grant listed in full or through the meta-tools, and the search's
// latency over a large index. Everything is generated deterministically
// and offline, so two runs on one commit answer the same figures.
package discoveryeval

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/registry"
)

// system is one vendor or product a domain's tools act on: its namespace
// and the name its users call it by.
type system struct {
	ns, label string
}

// op is one operation a domain offers, written once and stamped out for
// each of the domain's systems: the near-duplicates across systems that a
// real catalogue holds (jira.create_issue beside linear.create_issue).
type op struct {
	// verb is the part of the name after the namespace (refund_charge).
	verb string
	// title, when set, is the title of the tool on the systems that carry
	// titles (every other one, so some tools have none).
	title string
	// desc is the description; {sys} is replaced by the system's label.
	// Variants separated by "||" are used by turns across systems.
	desc   string
	effect toolplane.Effect
	// params are "name:type:description" entries separated by "|"; a
	// leading * marks a required one.
	params string
	tags   []string
	// hints are search hints, given on the domain's first system only:
	// a catalogue where some authors wrote hints and others did not.
	hints []string
	// deps are "requires:verb" or "pairs:verb" edges to another op of the
	// same system.
	deps []string
	// only, when set, limits the op to these systems (by namespace).
	only []string
}

// domain is a family of systems offering the same operations.
type domain struct {
	name    string
	systems []system
	ops     []op
}

// Tool is one tool version of the catalogue: its definition and, for a
// deprecated version, what replaces it.
type Tool struct {
	Def toolplane.Definition
	// Domain is the family the tool belongs to.
	Domain string
	// Deprecated marks a deprecated version, Replacement what replaces it
	// (a registry.Version replacement: "name", "name@range" or a version).
	Deprecated  bool
	Replacement string
}

// Catalogue answers the evaluation catalogue, sorted by name then version:
// every domain's operations on every system, and the hand-written hard
// cases (uninformative names, terse descriptions, deprecated versions).
func Catalogue() []Tool {
	var out []Tool
	for _, d := range domains() {
		for si, s := range d.systems {
			for _, o := range d.ops {
				if len(o.only) > 0 && !contains(o.only, s.ns) {
					continue
				}
				def := stamp(d, si, s, o)
				if old, ok := superseded[def.Name]; ok {
					prev := def
					prev.Version, prev.Description, prev.Title, prev.SearchHints = "1.4.0", old, "", nil
					prev.InputSchema = append([]byte(nil), def.InputSchema...)
					out = append(out, Tool{Def: prev, Domain: d.name, Deprecated: true, Replacement: def.Name + "@^2.0.0"})
					def.Version = "2.0.0"
				}
				out = append(out, Tool{Def: def, Domain: d.name})
			}
		}
	}
	out = append(out, specials()...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Def.Name != out[j].Def.Name {
			return out[i].Def.Name < out[j].Def.Name
		}
		return out[i].Def.Version < out[j].Def.Version
	})
	return out
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// stamp answers op o of domain d on system s (the si-th of d).
func stamp(d domain, si int, s system, o op) toolplane.Definition {
	variants := strings.Split(o.desc, "||")
	desc := strings.ReplaceAll(strings.TrimSpace(variants[si%len(variants)]), "{sys}", s.label)
	def := definition(s.ns+"."+o.verb, "1.0.0", desc, o.effect, o.params)
	if o.title != "" && si%2 == 0 {
		def.Title = o.title
	}
	if si == 0 {
		def.SearchHints = o.hints
	}
	def.Tags = append([]string{d.name, s.ns}, o.tags...)
	def.Owner = d.name + "-team"
	for _, dep := range o.deps {
		rel, verb, _ := strings.Cut(dep, ":")
		r := toolplane.CommonlyPairedWith
		if rel == "requires" {
			r = toolplane.RequiresOutputOf
		}
		def.Dependencies = append(def.Dependencies, toolplane.Dependency{Relation: r, Tool: s.ns + "." + verb})
	}
	return def
}

// definition answers a definition valid for registry.Build: bound to the
// handler of its own name, a write or send stating repeatable false, a
// send naming its connection.
func definition(name, version, desc string, effect toolplane.Effect, params string) toolplane.Definition {
	d := toolplane.Definition{
		Name: name, Version: version, Kind: toolplane.KindInternal, Description: desc,
		InputSchema: inputSchema(params), OutputSchema: json.RawMessage(`{"type":"object"}`),
		Effect:  effect,
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}},
	}
	if effect.Writes() {
		no := false
		d.Repeatable = &no
	}
	if effect == toolplane.EffectSend {
		ns, _, _ := strings.Cut(name, ".")
		d.Connection = ns
	}
	return d
}

// inputSchema answers the JSON Schema of params ("name:type:description"
// entries separated by "|", a leading * marking a required one).
func inputSchema(params string) json.RawMessage {
	props := map[string]any{}
	var required []string
	for _, p := range strings.Split(params, "|") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		parts := strings.SplitN(p, ":", 3)
		if len(parts) != 3 {
			panic(fmt.Sprintf("discoveryeval: parameter %q is not name:type:description", p))
		}
		name, typ, desc := strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1]), strings.TrimSpace(parts[2])
		if strings.HasPrefix(name, "*") {
			name = name[1:]
			required = append(required, name)
		}
		prop := map[string]any{"type": typ, "description": desc}
		switch typ {
		case "array":
			prop["items"] = map[string]any{"type": "string"}
		case "date":
			prop["type"], prop["format"] = "string", "date"
		case "datetime":
			prop["type"], prop["format"] = "string", "date-time"
		}
		props[name] = prop
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	raw, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return raw
}

// Bindings answers what the registry checks a catalogue's definitions
// against: a handler under each tool's name and a connection for each
// namespace.
func Bindings(tools []Tool) registry.Static {
	b := registry.Static{Handlers: map[string]bool{}, Connections: map[string]bool{}}
	for _, t := range tools {
		b.Handlers[t.Def.Binding.Handler.Key] = false
		if t.Def.Connection != "" {
			b.Connections[t.Def.Connection] = true
		}
	}
	return b
}

// Registry builds tools into a registry: the names with one active
// version through registry.Build, every name with a deprecated version
// (and the tools replacing one) through SetVersions, as published
// versions are.
func Registry(tools []Tool) (*registry.Registry, error) {
	versioned := map[string]bool{}
	for _, t := range tools {
		if t.Deprecated {
			versioned[t.Def.Name] = true
		}
	}
	var plain []toolplane.Definition
	var vs []registry.Version
	for _, t := range tools {
		if !versioned[t.Def.Name] {
			plain = append(plain, t.Def)
			continue
		}
		v := registry.Version{Def: t.Def, State: toolplane.StateActive}
		if t.Deprecated {
			v.State, v.Replacement = toolplane.StateDeprecated, t.Replacement
		}
		vs = append(vs, v)
	}
	reg, _, err := registry.Build(plain, registry.Options{Bindings: Bindings(tools)})
	if err != nil {
		return nil, fmt.Errorf("discoveryeval: build the catalogue: %w", err)
	}
	if len(vs) > 0 {
		if ps := reg.SetVersions("published", vs); len(ps) > 0 {
			return nil, fmt.Errorf("discoveryeval: publish the versioned tools: %w", &registry.CheckError{Problems: ps})
		}
	}
	return reg, nil
}
