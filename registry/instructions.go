package registry

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"golang.org/x/text/unicode/norm"

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
	// Phrase is the matched text as the screen read it (normalised, see
	// findInstruction), cut to a short excerpt.
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
//
// They are compiled on the first screen, not at start (0.25 MB of heap with
// squashedPatterns, which a node that reviews no definition never needs).
var instructionPatterns = sync.OnceValue(func() []*regexp.Regexp {
	screenCompiled.Store(true)
	return []*regexp.Regexp{
		// Overriding what the model was told before.
		regexp.MustCompile(`(?i)\b(ignore|disregard|forget|override|bypass)\s+(all\s+|any\s+|every\s+|the\s+|your\s+|of\s+)*(previous|prior|above|earlier|preceding|former|existing|other|system|original)\s+(instructions?|prompts?|messages?|rules|guidelines|guidance|directions|directives|context|guardrails)\b`),
		regexp.MustCompile(`(?i)\b(ignore|disregard|forget)\s+(all\s+|any\s+)?(your|the)\s+(instructions|rules|guidelines|guidance|guardrails|safety)\b`),
		// The same with a few words of padding: "disregard the earlier,
		// carefully written guidance".
		regexp.MustCompile(`(?i)\b(ignore|disregard|forget)(\s+\S+){0,3}?\s+(previous|prior|above|earlier|preceding),?(\s+\S+){0,3}?\s+(instructions?|guidance|rules|guidelines|directions|directives|prompts?)\b`),
		regexp.MustCompile(`(?i)\bforget\s+(everything|all)\s+(above|before|prior|previous|so\s+far|you\s+(were|have\s+been)\s+told)\b`),
		regexp.MustCompile(`(?i)\byour\s+(new|real|actual|true)\s+(task|job|goal|role|objective|mission|instructions?)\b`),
		// Telling the model what it is or must do from here on.
		regexp.MustCompile(`(?i)\byou\s+(must|should|shall|will|are\s+to|have\s+to|need\s+to)\s+now\b`),
		regexp.MustCompile(`(?i)\bfrom\s+now\s+on\b`),
		regexp.MustCompile(`(?i)\byou\s+are\s+now\s+(a|an|the|in|my|no\s+longer)\b`),
		regexp.MustCompile(`(?i)\b(new|updated|real|actual|hidden|secret)\s+instructions\s*:`),
		regexp.MustCompile(`(?i)\b(pretend|act)\s+(to\s+be|as\s+if|that)\s+you\b`),
		// Telling the model to call a tool, whatever it was asked: a tool
		// describes itself, it does not schedule other calls.
		regexp.MustCompile(`(?i)\bbefore\s+(answering|responding|replying|you\s+(answer|respond|reply))\W+(you\s+must\s+)?always\s+(call|invoke|use|run)\b`),
		regexp.MustCompile(`(?i)\balways\s+(call|invoke)\s+(the\s+)?(tool\s+)?[a-z0-9]+([._][a-z0-9]+)+`),
		regexp.MustCompile(`(?i)\bimportant\s*:(\s*\S+){0,8}?\s+(call|invoke)\s+(the\s+|this\s+)?([a-z0-9]+([._][a-z0-9]+)+|tool\b)`),
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
})

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

// squashedPatterns are instructionPatterns for text whose words were
// spelled out letter by letter with single spaces ("i g n o r e a l l …"),
// which reads as one word once collapsed: the same phrases with the
// spaces between their words optional.
var squashedPatterns = sync.OnceValue(func() []*regexp.Regexp {
	plain := instructionPatterns()
	out := make([]*regexp.Regexp, len(plain))
	squash := strings.NewReplacer(`\s+`, `\s*`, `\b`, ``)
	for i, p := range plain {
		out[i] = regexp.MustCompile(squash.Replace(p.String()))
	}
	return out
})

// screenCompiled is set once instructionPatterns are compiled (for a test).
var screenCompiled atomic.Bool

// findInstruction answers the first text addressed to the model in s, or
// "". A model reads through the disguises a literal match would miss, so
// s is screened in two forms (see plain and folded): as it reads once
// compatibility characters (fullwidth letters, ligatures) are their plain
// forms and invisible code points are gone, and then also with case
// folded, '-', '_' and '.' read as spaces and spaced-out letters joined.
// Encodings (base64), letter substitutions (l33t) and other languages are
// not recognised: the screen is a tripwire for review, not a filter.
func findInstruction(s string) string {
	p := plain(s)
	if m := match(instructionPatterns(), p); m != "" {
		return m
	}
	f, spelled := folded(p)
	if m := match(instructionPatterns(), f); m != "" {
		return m
	}
	for _, w := range spelled {
		if m := match(squashedPatterns(), w); m != "" {
			return m
		}
	}
	return ""
}

func match(patterns []*regexp.Regexp, s string) string {
	for _, p := range patterns {
		if loc := p.FindStringIndex(s); loc != nil {
			m := strings.TrimSpace(s[loc[0]:loc[1]])
			if len(m) > maxPhrase {
				m = m[:maxPhrase]
			}
			return strings.ToValidUTF8(m, "")
		}
	}
	return ""
}

// plain answers s in NFKC ("Ｉｇｎｏｒｅ" is "Ignore", "Ｓｙｓｔｅｍ：" is
// "System:") without the code points a reader never sees: format
// characters (zero-width spaces and joiners, soft hyphens, bidi marks),
// variation selectors and the other default-ignorable code points.
func plain(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.In(r, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point) {
			return -1
		}
		return r
	}, s)
	return norm.NFKC.String(s)
}

// separators are read as the spaces between words: "ignore-all-previous"
// and "ignore_all_previous" are three words, as a model reads them.
var separators = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[-_.]+`) })

// spacedOut is a word spelled out letter by letter, three letters or more
// each followed by one space: "i g n o r e".
var spacedOut = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\b(?:\pL ){2,}\pL\b`) })

// folded answers s lowered, with separator runs as spaces and every word
// spelled out letter by letter joined ("i g n o r e  a l l" reads
// "ignore  all"), and the joined runs of at least six letters, which are
// whole phrases when the words were spelled with single spaces.
func folded(s string) (string, []string) {
	s = separators().ReplaceAllString(strings.ToLower(s), " ")
	var spelled []string
	s = spacedOut().ReplaceAllStringFunc(s, func(run string) string {
		w := strings.ReplaceAll(run, " ", "")
		if len(w) >= 6 {
			spelled = append(spelled, w)
		}
		return w
	})
	return s, spelled
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
