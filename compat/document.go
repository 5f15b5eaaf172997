package compat

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane/schema"
)

// annotationKeys carry no assertion: changing them changes what a reader is
// told, never which values validate. Changes to them need only PATCH.
var annotationKeys = map[string]bool{
	"title": true, "description": true, "examples": true, "$comment": true,
	"deprecated": true, "readOnly": true, "writeOnly": true,
	"contentMediaType": true, "contentEncoding": true, "contentSchema": true,
	"$schema": true, "$id": true, "$anchor": true, "$dynamicAnchor": true,
}

// descriptionKeys are the annotations a model or a person reads as prose.
var descriptionKeys = map[string]bool{"title": true, "description": true, "examples": true, "$comment": true}

// skipKeys are containers, not constraints: $defs only matters through the
// references that reach it, and those are followed where they are used.
var skipKeys = map[string]bool{"$defs": true, "definitions": true}

// mergeGroups are keywords that read each other: additionalProperties
// depends on which names properties and patternProperties declare in the
// same object, items on how many prefixItems there are, and so on. Folding
// a $ref or allOf branch into its parent is only exact when no group is
// split between them.
var mergeGroups = [][]string{
	{"properties", "patternProperties", "additionalProperties"},
	{"prefixItems", "items"},
	{"contains", "minContains", "maxContains"},
	{"if", "then", "else"},
}

// noMerge keywords look at what every other keyword evaluated, so an object
// carrying one is never folded.
var noMerge = map[string]bool{"unevaluatedProperties": true, "unevaluatedItems": true, "$dynamicRef": true}

// document is one decoded schema with its anchors, so that references can
// be resolved inside it. Nothing outside the document is ever consulted.
type document struct {
	root    any
	anchors map[string]string
	flat    map[string]node
	folds   int
}

func newDocument(root any) *document {
	d := &document{root: root, anchors: map[string]string{}, flat: map[string]node{}}
	d.collectAnchors(root)
	return d
}

// collectAnchors records where each anchor of the document sits; of two
// with one name, the first in walk order.
func (d *document) collectAnchors(root any) {
	_ = schema.Walk(root, func(m map[string]any, at string) error {
		for _, k := range []string{"$anchor", "$dynamicAnchor"} {
			if a, ok := m[k].(string); ok {
				if _, seen := d.anchors[a]; !seen {
					d.anchors[a] = at
				}
			}
		}
		return nil
	})
}

// resolve answers the node a $ref names and its pointer. ok is false for a
// reference outside the document or to nothing: such a reference is then
// compared as the string it is.
func (d *document) resolve(ref string) (node any, at string, ok bool) {
	if !strings.HasPrefix(ref, "#") {
		return nil, "", false
	}
	frag, err := url.PathUnescape(ref[1:])
	if err != nil {
		return nil, "", false
	}
	if frag != "" && !strings.HasPrefix(frag, "/") {
		p, found := d.anchors[frag]
		if !found {
			return nil, "", false
		}
		frag = p
	}
	v, found := d.lookup(frag)
	return v, frag, found
}

func (d *document) lookup(p string) (any, bool) { return schema.Lookup(d.root, p) }

// keyword is one keyword's value and where it sits in its document.
type keyword struct {
	v  any
	at string
}

// node is a schema object with $ref and allOf folded in where that is
// exact, so that moving a definition into $defs, or splitting it into
// allOf parts, is not mistaken for a change.
type node map[string]keyword

// maxFold bounds how deep one fold follows references and allOf, and
// maxFolds how many objects it visits: allOf branches that reference
// allOf branches can fan out exponentially within a small document. Past
// either bound the rest is left unfolded, which is compared more strictly,
// never less.
const (
	maxFold  = 32
	maxFolds = 256
)

// flatten builds the node for the schema object m at pointer at. The
// result depends only on at, so it is computed once per document.
func (d *document) flatten(m map[string]any, at string) node {
	if n, ok := d.flat[at]; ok {
		return n
	}
	d.folds = 0
	n := d.fold(m, at, map[string]bool{at: true}, 0)
	d.flat[at] = n
	return n
}

func (d *document) fold(m map[string]any, at string, chain map[string]bool, depth int) node {
	n := make(node, len(m))
	for k, v := range m {
		if !skipKeys[k] {
			n[k] = keyword{v: v, at: at + "/" + escape(k)}
		}
	}
	d.folds++
	if depth >= maxFold || d.folds > maxFolds {
		return n
	}
	if r, ok := n["$ref"]; ok {
		if s, ok := r.v.(string); ok {
			if target, tAt, ok := d.resolve(s); ok && !chain[tAt] {
				switch t := target.(type) {
				case bool:
					// A reference to true adds nothing; one to false is
					// left in place and compared as a reference.
					if t {
						delete(n, "$ref")
					}
				case map[string]any:
					chain[tAt] = true
					sub := d.fold(t, tAt, chain, depth+1)
					delete(chain, tAt)
					if mergeable(n, sub, "$ref") {
						delete(n, "$ref")
						absorb(n, sub)
					}
				}
			}
		}
	}
	if all, ok := n["allOf"].v.([]any); ok && len(all) > 0 {
		acc := make(node, len(n))
		for k, v := range n {
			if k != "allOf" {
				acc[k] = v
			}
		}
		for i, br := range all {
			brAt := n["allOf"].at + "/" + strconv.Itoa(i)
			var sub node
			switch b := br.(type) {
			case bool:
				if !b {
					return n
				}
				sub = node{}
			case map[string]any:
				sub = d.fold(b, brAt, chain, depth+1)
			default:
				return n
			}
			if !mergeable(acc, sub, "") {
				return n
			}
			absorb(acc, sub)
		}
		return acc
	}
	return n
}

// mergeable reports whether folding sub into n describes the same values
// as applying both. It holds when they share no assertion keyword and split
// no group of keywords that read each other. ignore is a keyword of n that
// the fold removes.
func mergeable(n, sub node, ignore string) bool {
	has := func(x node, k string) bool {
		if k == ignore {
			return false
		}
		_, ok := x[k]
		return ok
	}
	for k := range sub {
		if noMerge[k] {
			return false
		}
		if !annotationKeys[k] && has(n, k) {
			return false
		}
	}
	for k := range n {
		if noMerge[k] && k != ignore {
			return false
		}
	}
	for _, g := range mergeGroups {
		inN, inSub := false, false
		for _, k := range g {
			inN = inN || has(n, k)
			_, ok := sub[k]
			inSub = inSub || ok
		}
		if inN && inSub {
			return false
		}
	}
	return true
}

// absorb copies sub's keywords into n. n's annotations win, because the
// outermost description is the one a reader sees next to the field.
func absorb(n, sub node) {
	for k, v := range sub {
		if _, ok := n[k]; !ok {
			n[k] = v
		}
	}
}
