// Package boundary turns what a tool handler answered into what a model may
// read. It sits between the handler and the model on every call, so every
// rule here is total: it answers for any Go value, never returns an error for
// the payload, and never lets a payload through that is larger than the bound
// it was given.
//
// # Pipeline
//
// [Apply] runs the steps in a fixed order:
//
//  1. [Normalize] rewrites the answer into a plain JSON tree.
//  2. [Redact] replaces the value of every credential-named key and every
//     credential a string holds, and [EscapeKey] renames keys that could
//     pass for toolplane's own markers. They run before any bound, so
//     whether a secret disappears never depends on which items a bound
//     happened to keep, and every marker bounding sees is its own.
//  3. max_results keeps the first items of an array answer.
//  4. [Bound] brings the encoded size within the byte limit.
//  5. [AttachRefs] names the rows that Dropped markers stand in for.
//  6. [Bound] runs again: a ref adds bytes, and the payload must stay within
//     the limit that was promised. For a payload that already fits this pass
//     changes nothing. Markers this pass writes are named as well, when the
//     names still fit.
//
// Output schema validation happens before Apply, in another package: the
// bounded form may hold markers or fewer items than the schema allows, which
// is why callers read [toolplane.Meta.Truncated].
//
// # Plain trees
//
// A plain tree is built only from nil, bool, string, [json.Number], []any and
// map[string]any. Encode, Size and Redact accept any value and normalise
// what is not plain, so they cannot be fooled by an odd type; Bound and
// AttachRefs expect a plain tree and treat anything else as an opaque
// scalar. Trees are treated as immutable values: the functions here never
// modify their input, and a result may share unchanged subtrees with it.
//
// # One encoding
//
// [Encode] is the only encoder of a payload and [Size] is its exact measure.
// Bounding measures with Size and [Render] writes with Encode, so the bytes a
// model reads are the bytes that were counted. Encode writes compact JSON with
// object keys in bytewise order and no HTML escaping; for a plain tree it is
// byte for byte what encoding/json writes with SetEscapeHTML(false), minus the
// trailing newline.
//
// # Bounding
//
// [Bound] never cuts a structure in the middle: the answer is always a
// well-formed tree whose Size is at most the limit. A value that fits is
// returned as it is. Otherwise each value is given a budget, the number of
// bytes it may take, and shrunk as follows.
//
// A Dropped marker, {"__dropped__":{"reason":"too_large","bytes":N}}, stands
// in for a value of N encoded bytes and may carry a ref naming the row it
// replaced. A marker is atomic: bounding keeps it whole or removes it, and
// never edits it.
//
// An array of budget B gives each element the budget B-2, the room it would
// have as the only element. First, every element larger than that is replaced
// in place, so index i of the answer still answers for index i of the input:
// an array or object element is shrunk recursively and keeps its shape; when
// that is impossible, or the element is a scalar, it becomes a marker. An
// element that cannot take even a marker's room ends the array there. Then,
// while the array is over B, elements are removed from the end; the first
// items are kept in order and removed items leave no marker. An empty array
// fits any budget of two bytes or more.
//
// An object of budget B gives each value the room it would have as the only
// entry (B minus the braces, its key and the colon). First, every value larger
// than that is replaced in place as for an array element, and keeps its key.
// Then, while the object is over B, the largest remaining value that is not a
// marker and is larger than its own marker is replaced by a marker (ties go to
// the bytewise smaller key). If the object still does not fit, or one of its
// values could not be kept even as a marker, the object cannot be shrunk and
// its parent treats it as a value that needs a marker.
//
// At the top level, a value that cannot be shrunk becomes a marker when the
// marker fits the limit, and the empty string "" otherwise: it is the
// smallest JSON value a model can read as "nothing here", and it fits the
// two-byte minimum. This is the only place "" stands in for a value; deeper
// down a value that cannot be kept is removed by its container rather than
// replaced by something that reads like real data.
//
// Every marker records the size of the value it replaced, as Bound was given
// it.
//
// Because every element adds bytes, shrinking in place and then cutting the
// tail keeps the longest prefix that fits. Bound therefore takes elements in
// order, measures each once, and stops at the first that does not fit:
// what bounding a long list costs follows what is kept, not what the tool
// returned. Apply goes one step further for an array answer and normalises
// and redacts its items one at a time too, so an item past the cut is never
// normalised at all; its answer is the same as running the steps one after
// another on the whole answer.
//
// # Redaction
//
// Redaction has two parts, both in [Redact]. The main one is a rule on key
// names: a key whose folded name ends in a credential word ("token",
// "password", "secret", "apikey", ...) has its value replaced, whatever the
// value is, while counts and cursors that merely mention one ("max_tokens",
// "next_page_token") are kept. The second is a scan of string values for
// the few credential shapes vendors made distinctive (a fixed prefix and a
// long run of token characters, PEM private keys, JSON Web Tokens, a
// "Bearer" credential), and for credentials named in the text itself: the
// value after a credential-named field ("db_password=…", "password: …", a
// quoted JSON field, a URL's "?token=…"), judged by the same name rule, and
// a URL's user-info password. It never judges prose, so text that talks
// about a password without giving one a name and a separator is kept as
// written. A field that the model must not see at all belongs out of the
// tool's output schema instead. [RedactJSON] applies the same rule to
// stored arguments shown to a person.
//
// # Markers data cannot forge
//
// Toolplane's own markers are a Dropped marker's key and the "toolplane/"
// names of MCP _meta. A tool's answer may hold keys that look like them, to
// the byte or to a reader (see [LooksLikeMarker]); Apply renames such keys
// (see [EscapeKey]) before bounding, so inside the data a
// model reads, a marker is always one that bounding wrote and a toolplane
// label is always toolplane's.
package boundary
