package registry

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"github.com/toolplane/toolplane"
)

// Instruction is text in a definition that addresses the model rather
// than describing the tool: "ignore all previous instructions", "you must
// now…", a forged "SYSTEM:" turn. A model reads a tool's name and every
// description as trusted context, so such text is how a tool author (or an
// upstream server) would steer agents; it is never needed to describe a
// tool.
type Instruction struct {
	// Field is where the text is: name, description, or a description or
	// title inside a schema (input_schema.properties.id.description).
	Field string `json:"field"`
	// Phrase is the matched text, as written, cut to a short excerpt.
	Phrase string `json:"phrase"`
}

func (i Instruction) String() string { return i.Field + ": " + strconvQuote(i.Phrase) }

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// instructionPatterns recognise text addressed to the model. Each needs
// words a description of what a tool does has no use for, so that
// "Ignores archived tickets" or "Returns the system status" pass.
var instructionPatterns = []*regexp.Regexp{
	// Overriding what the model was told before.
	regexp.MustCompile(`(?i)\b(ignore|disregard|forget|override|bypass)\s+(all\s+|any\s+|every\s+|the\s+|your\s+|of\s+)*(previous|prior|above|earlier|preceding|former|existing|other|system|original)\s+(instructions?|prompts?|messages?|rules|guidelines|directions|directives|context|guardrails)\b`),
	regexp.MustCompile(`(?i)\b(ignore|disregard|forget)\s+(all\s+|any\s+)?(your|the)\s+(instructions|rules|guidelines|guardrails|safety)\b`),
	// Telling the model what it is or must do from here on.
	regexp.MustCompile(`(?i)\byou\s+(must|should|shall|will|are\s+to|have\s+to|need\s+to)\s+now\b`),
	regexp.MustCompile(`(?i)\bfrom\s+now\s+on\b`),
	regexp.MustCompile(`(?i)\byou\s+are\s+now\s+(a|an|the|in|my|no\s+longer)\b`),
	regexp.MustCompile(`(?i)\b(new|updated|real|actual|hidden|secret)\s+instructions\s*:`),
	regexp.MustCompile(`(?i)\b(pretend|act)\s+(to\s+be|as\s+if|that)\s+you\b`),
	// The model's own configuration.
	regexp.MustCompile(`(?i)\bsystem\s+(prompt|message|instructions)\b`),
	regexp.MustCompile(`(?i)\bdeveloper\s+(mode|message|instructions)\b`),
	regexp.MustCompile(`(?i)\bjailbr(eak|oken)\b`),
	// Hiding the call from the person.
	regexp.MustCompile(`(?i)\b(do\s+not|don't|never|without)\s+(tell|telling|inform|informing|notify|notifying|mention|mentioning|alert|alerting)\s+(the\s+|your\s+)?(user|human|person|operator)\b`),
	// Forged turns and chat-template markers.
	regexp.MustCompile(`(?im)^[\s>*#\[(]*(system|assistant|developer|human)\s*[:\]]`),
	regexp.MustCompile(`(?i)<\|?\s*/?\s*(im_start|im_end|system|endoftext)\s*\|?>|\[/?INST\]|<</?SYS>>|</?(system|instructions?)>`),
}

// maxPhrase bounds the excerpt an Instruction carries.
const maxPhrase = 80

// Instructions answers every place in d whose text addresses the model:
// its name, its description, and every description and title inside its
// input, output and error schemas. None means nothing was found; it is a
// screen for review, not a proof of innocence.
func Instructions(d *toolplane.Definition) []Instruction {
	var out []Instruction
	scan := func(field, text string) {
		if m := findInstruction(text); m != "" {
			out = append(out, Instruction{Field: field, Phrase: m})
		}
	}
	// A name is read with its separators as spaces, as a model would.
	scan("name", strings.NewReplacer(".", " ", "_", " ", "-", " ").Replace(d.Name))
	scan("description", d.Description)
	for _, s := range []struct {
		field string
		raw   json.RawMessage
	}{{"input_schema", d.InputSchema}, {"output_schema", d.OutputSchema}, {"error_schema", d.ErrorSchema}} {
		var doc any
		if len(s.raw) == 0 || json.Unmarshal(s.raw, &doc) != nil {
			continue
		}
		schemaText(s.field, doc, scan)
	}
	return out
}

// findInstruction answers the first text addressed to the model in s, or
// "".
func findInstruction(s string) string {
	for _, p := range instructionPatterns {
		if loc := p.FindStringIndex(s); loc != nil {
			m := strings.TrimSpace(s[loc[0]:loc[1]])
			if len(m) > maxPhrase {
				m = strings.ToValidUTF8(m[:maxPhrase], "")
			}
			return m
		}
	}
	return ""
}

// schemaText calls scan with every description and title in a schema
// document, and every property name, each with its path.
func schemaText(path string, v any, scan func(field, text string)) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child := path + "." + k
			if props, ok := x[k].(map[string]any); ok && k == "properties" {
				// A property's name is read by the model too.
				names := make([]string, 0, len(props))
				for name := range props {
					names = append(names, name)
				}
				sort.Strings(names)
				for _, name := range names {
					scan(child+"."+name, strings.NewReplacer("_", " ", "-", " ").Replace(name))
				}
			}
			switch val := x[k].(type) {
			case string:
				if k == "description" || k == "title" {
					scan(child, val)
				}
			default:
				schemaText(child, val, scan)
			}
		}
	case []any:
		for _, e := range x {
			schemaText(path+"[]", e, scan)
		}
	}
}
