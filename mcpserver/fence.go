package mcpserver

import (
	"encoding/json"
	"mime"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/boundary"
)

// fence labels the text a model reads in content blocks that came from
// outside the platform, as they are served on the governed copy of an
// upstream. Every field of a block that is free text a model reads is
// wrapped by boundary.Fence, so nothing in it can pass for toolplane's own
// words or for the end of the label: a text block's text, an embedded
// resource's text, and a resource link's name, title and description. The
// fields that are identifiers a client acts on (a URI, a MIME type, an
// icon's sizes and theme, an annotation's audience and date) cannot be
// fenced without breaking them, so they are kept only in their own syntax,
// which has no room for a sentence or a fence's end, and dropped otherwise.
// A block's _meta keys were renamed by the boundary already (none reads as
// toolplane's), and the result's own _meta says the whole answer is
// untrusted. A block of a kind not listed here is served as fenced text of
// its JSON form: nothing new reaches a model unlabelled.
func fence(content []mcp.Content, source string) {
	for i, c := range content {
		switch b := c.(type) {
		case *mcp.TextContent:
			b.Text = boundary.Fence(source, b.Text)
			b.Annotations = cleanAnnotations(b.Annotations)
		case *mcp.ImageContent:
			b.MIMEType = cleanMIMEType(b.MIMEType)
			b.Annotations = cleanAnnotations(b.Annotations)
		case *mcp.AudioContent:
			b.MIMEType = cleanMIMEType(b.MIMEType)
			b.Annotations = cleanAnnotations(b.Annotations)
		case *mcp.ResourceLink:
			b.URI = cleanURI(b.URI)
			b.Name = fenceNonEmpty(source, b.Name)
			b.Title = fenceNonEmpty(source, b.Title)
			b.Description = fenceNonEmpty(source, b.Description)
			b.MIMEType = cleanMIMEType(b.MIMEType)
			b.Annotations = cleanAnnotations(b.Annotations)
			b.Icons = cleanIcons(b.Icons)
		case *mcp.EmbeddedResource:
			if r := b.Resource; r != nil {
				r.URI = cleanURI(r.URI)
				r.MIMEType = cleanMIMEType(r.MIMEType)
				r.Text = fenceNonEmpty(source, r.Text)
			}
			b.Annotations = cleanAnnotations(b.Annotations)
		default:
			raw, err := json.Marshal(c)
			if err != nil {
				raw = []byte(`"a content block that could not be shown"`)
			}
			content[i] = &mcp.TextContent{Text: boundary.Fence(source, string(raw))}
		}
	}
}

// fenceNonEmpty fences s unless it is empty: an absent optional field stays
// absent.
func fenceNonEmpty(source, s string) string {
	if s == "" {
		return s
	}
	return boundary.Fence(source, s)
}

// maxIdentifier bounds an identifier field of a content block kept as it
// is.
const maxIdentifier = 2048

// cleanURI keeps a URI made of the characters RFC 3986 allows (no space,
// quote or angle bracket, so no sentence and no fence's end), and answers
// "" for anything else.
func cleanURI(u string) string {
	if len(u) > maxIdentifier || !strings.Contains(u, ":") {
		return ""
	}
	for i := 0; i < len(u); i++ {
		if !uriByte(u[i]) {
			return ""
		}
	}
	return u
}

// uriByte reports whether c is one of RFC 3986's unreserved, reserved or
// percent-encoding characters.
func uriByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~:/?#[]@!$&'()*+,;=%", c) >= 0
}

// cleanMIMEType keeps a media type whose parameters need no quoting,
// written in its canonical form, and answers "" for anything else.
func cleanMIMEType(t string) string {
	if t == "" || len(t) > 255 {
		return ""
	}
	mt, params, err := mime.ParseMediaType(t)
	if err != nil {
		return ""
	}
	// A value that needs quoting could hold a sentence: such a type is
	// not kept.
	out := mime.FormatMediaType(mt, params)
	if out == "" || strings.ContainsRune(out, '"') {
		return ""
	}
	return out
}

// cleanAnnotations keeps the roles the protocol defines, a date that
// parses as one, and the priority (a number).
func cleanAnnotations(a *mcp.Annotations) *mcp.Annotations {
	if a == nil {
		return nil
	}
	out := &mcp.Annotations{Priority: a.Priority}
	for _, r := range a.Audience {
		if r == "user" || r == "assistant" {
			out.Audience = append(out.Audience, r)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, a.LastModified); err == nil {
		out.LastModified = a.LastModified
	}
	return out
}

// cleanIcons keeps each icon's source as a URI, its MIME type, sizes of
// the form the protocol gives ("48x48", "any") and a theme it defines.
func cleanIcons(icons []mcp.Icon) []mcp.Icon {
	var out []mcp.Icon
	for _, ic := range icons {
		src := cleanURI(ic.Source)
		if src == "" {
			continue
		}
		kept := mcp.Icon{Source: src, MIMEType: cleanMIMEType(ic.MIMEType)}
		for _, sz := range ic.Sizes {
			if iconSize(sz) {
				kept.Sizes = append(kept.Sizes, sz)
			}
		}
		if ic.Theme == "light" || ic.Theme == "dark" {
			kept.Theme = ic.Theme
		}
		out = append(out, kept)
	}
	return out
}

// iconSize reports whether s reads as an icon size: "any" or WxH in
// digits.
func iconSize(s string) bool {
	if s == "any" {
		return true
	}
	w, h, ok := strings.Cut(s, "x")
	return ok && digits(w) && digits(h) && len(s) <= 16
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
