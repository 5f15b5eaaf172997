package boundary

import (
	"crypto/rand"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MetaPrefix begins every key toolplane writes into an MCP _meta object
// ("toolplane/untrusted", "toolplane/approval_id"). Keys with it belong to
// toolplane alone; [EscapeKey] renames any that arrive in data.
const MetaPrefix = "toolplane/"

// EscapeKey renames an object key of a tool's answer that could pass for one
// of toolplane's own: the Dropped marker key, and keys in toolplane's _meta
// namespace, as a reader sees them (see [LooksLikeMarker]: "__DROPPED__",
// "toolplane∕untrusted" with a division slash, a key with a zero-width space
// inside). It answers the key to use and whether it differs.
//
// The renaming prefixes one '_'. It is applied to every key whose folded
// form is the marker key with any number of extra leading underscores
// ("__dropped__", "___dropped__", ...) or MetaPrefix after any number of
// leading underscores. A renamed key is such a key again, so the renaming is
// one to one: no renamed key can equal a key that was kept, or another
// renamed key, and nothing a tool answers is lost or merged by it. Keys that
// are not reserved, the common case, are mostly rejected by their first
// byte.
func EscapeKey(k string) (string, bool) {
	if k == "" {
		return k, false
	}
	if c := k[0]; c < utf8.RuneSelf && c != '_' && c != 't' && c != 'T' {
		return k, false
	}
	if reservedKey(k) {
		return "_" + k, true
	}
	return k, false
}

// renamedEntry is a key EscapeKey renamed, with its value.
type renamedEntry struct {
	from, to string
	value    any
}

// putRenamed moves renamed entries of out to their new keys. Every old key
// is removed before any new one is written: a new key may be another
// entry's old key ("__dropped__" becomes "___dropped__", which itself
// becomes "____dropped__"), and renaming one at a time would lose a value.
func putRenamed(out map[string]any, renamed []renamedEntry) {
	for _, r := range renamed {
		delete(out, r.from)
	}
	for _, r := range renamed {
		out[r.to] = r.value
	}
}

// Fence wraps text that came from outside the platform for a reader that
// sees only text, such as the content blocks a model reads from the
// governed copy of an MCP server:
//
//	<untrusted-data source="mcp server \"docs\"" boundary="Q2V…">
//	…the text…
//	</untrusted-data boundary="Q2V…">
//
// The boundary is fresh random text for every call, chosen so the text does
// not contain it, so nothing the text holds (an end tag, a line that reads
// "SYSTEM:", a copy of toolplane's envelope) can close the fence early or
// pass for something outside it. source says where the text came from.
func Fence(source, text string) string {
	tag := fenceBoundary(text)
	var b strings.Builder
	b.Grow(len(text) + 2*len(tag) + len(source) + 64)
	b.WriteString(`<untrusted-data source=`)
	b.WriteString(strconv.Quote(source))
	b.WriteString(` boundary="`)
	b.WriteString(tag)
	b.WriteString("\">\n")
	b.WriteString(text)
	b.WriteString("\n</untrusted-data boundary=\"")
	b.WriteString(tag)
	b.WriteString("\">")
	return b.String()
}

// fenceBoundary answers random text that text does not contain.
func fenceBoundary(text string) string {
	for {
		tag := rand.Text()
		if !strings.Contains(text, tag) {
			return tag
		}
	}
}
