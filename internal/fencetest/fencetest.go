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
