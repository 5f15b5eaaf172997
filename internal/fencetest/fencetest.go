// Package fencetest takes apart the fences boundary.Fence writes, for tests
// that check what a model reads. Nothing outside tests reads a fence back:
// the model reads it as it is.
package fencetest

import (
	"strconv"
	"strings"
)

// Unfence returns the source a fence boundary.Fence wrote names and the
// text inside it, and false when s is not such a fence.
func Unfence(s string) (source, text string, ok bool) {
	head, body, found := strings.Cut(s, "\n")
	if !found || !strings.HasPrefix(head, `<untrusted-data source=`) || !strings.HasSuffix(head, `">`) {
		return "", "", false
	}
	attrs := strings.TrimPrefix(head, `<untrusted-data source=`)
	q, tag, found := strings.Cut(attrs, ` boundary="`)
	if !found {
		return "", "", false
	}
	tag = strings.TrimSuffix(tag, `">`)
	src, err := strconv.Unquote(q)
	if err != nil {
		return "", "", false
	}
	inner, found := strings.CutSuffix(body, "\n</untrusted-data boundary=\""+tag+"\">")
	if !found || strings.Contains(inner, tag) {
		return "", "", false
	}
	return src, inner, true
}

// Walk calls str with every non-empty string in the plain tree v (maps,
// slices and strings, as the result boundary answers), and key, when not
// nil, with every object key; a map marker answers for (boundary.IsMarker,
// passed as marker) stands in place of a value and is not entered.
func Walk(v any, marker func(any) bool, str, key func(string)) {
	switch x := v.(type) {
	case string:
		if x != "" {
			str(x)
		}
	case map[string]any:
		if marker != nil && marker(x) {
			return
		}
		for k, e := range x {
			if key != nil {
				key(k)
			}
			Walk(e, marker, str, key)
		}
	case []any:
		for _, e := range x {
			Walk(e, marker, str, key)
		}
	}
}
