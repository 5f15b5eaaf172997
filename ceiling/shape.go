package ceiling

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane"
)

// The text form of a run shape, for a command line:
//
//	shape = call | group
//	call  = "call" "(" provider [ "," fanout ] ")"
//	group = ( "seq" | "branch" | "par" ) "(" shape { "," shape } ")"
//
// with spaces allowed between tokens. "par(call(exa,3),seq(call(exa),
// call(fullenrich,10)))" is a run making three calls to exa at once
// beside a sequence of one exa call and then ten fullenrich calls at
// once: at most four calls to exa, ten to fullenrich.
var keywords = map[string]toolplane.ShapeKind{
	"seq": toolplane.ShapeSequence, "branch": toolplane.ShapeBranch, "par": toolplane.ShapeParallel, "call": toolplane.ShapeCall,
}

// Format answers s in its text form (Parse reads it back); a fanout of 0
// or 1 is left out.
func Format(s toolplane.RunShape) string {
	var b strings.Builder
	format(&b, s)
	return b.String()
}

func format(b *strings.Builder, s toolplane.RunShape) {
	switch s.Kind {
	case toolplane.ShapeCall:
		b.WriteString("call(" + s.Provider)
		if s.Fanout > 1 {
			b.WriteString("," + strconv.FormatInt(s.Fanout, 10))
		}
		b.WriteByte(')')
		return
	case toolplane.ShapeSequence:
		b.WriteString("seq(")
	case toolplane.ShapeParallel:
		b.WriteString("par(")
	default:
		b.WriteString(string(s.Kind) + "(")
	}
	for i, p := range s.Parts {
		if i > 0 {
			b.WriteByte(',')
		}
		format(b, p)
	}
	b.WriteByte(')')
}

// Parse reads a run shape's text form and checks it (CheckShape): an
// *InvalidError, at field "shape", for text out of the grammar or a shape
// out of bounds. A call's fanout of 1 reads as 0, as Format leaves it out.
func Parse(text string) (toolplane.RunShape, error) {
	if len(text) > MaxShapeText {
		return toolplane.RunShape{}, &InvalidError{"shape", fmt.Sprintf("%d bytes: at most %d", len(text), MaxShapeText)}
	}
	p := parser{text: text}
	s, err := p.shape(1)
	if err != nil {
		return toolplane.RunShape{}, err
	}
	p.space()
	if p.pos < len(p.text) {
		return toolplane.RunShape{}, p.fail("unexpected text after the shape")
	}
	if err := CheckShape(s); err != nil {
		return toolplane.RunShape{}, err
	}
	return s, nil
}

// parser reads the text form by recursive descent, its depth bounded by
// MaxDepth so no input recurses further.
type parser struct {
	text string
	pos  int
}

func (p *parser) fail(why string) error {
	return &InvalidError{"shape", fmt.Sprintf("at byte %d: %s (want call(provider[,fanout]), seq(...), branch(...) or par(...))", p.pos, why)}
}

func (p *parser) space() {
	for p.pos < len(p.text) && (p.text[p.pos] == ' ' || p.text[p.pos] == '\t' || p.text[p.pos] == '\n' || p.text[p.pos] == '\r') {
		p.pos++
	}
}

// word reads a run of the name grammar's bytes.
func (p *parser) word() string {
	p.space()
	start := p.pos
	for p.pos < len(p.text) {
		c := p.text[p.pos]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			p.pos++
			continue
		}
		break
	}
	return p.text[start:p.pos]
}

func (p *parser) expect(c byte) bool {
	p.space()
	if p.pos < len(p.text) && p.text[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

func (p *parser) shape(depth int) (toolplane.RunShape, error) {
	if depth > MaxDepth {
		return toolplane.RunShape{}, p.fail(fmt.Sprintf("the shape nests deeper than %d", MaxDepth))
	}
	kw := p.word()
	kind, ok := keywords[kw]
	if !ok {
		return toolplane.RunShape{}, p.fail(fmt.Sprintf("%q is not a node", clip(kw)))
	}
	if !p.expect('(') {
		return toolplane.RunShape{}, p.fail("want '(' after " + kw)
	}
	s := toolplane.RunShape{Kind: kind}
	if kind == toolplane.ShapeCall {
		s.Provider = p.word()
		if s.Provider == "" {
			return s, p.fail("a call names its provider")
		}
		if p.expect(',') {
			n, err := strconv.ParseInt(p.word(), 10, 64)
			if err != nil || n < 1 || n > MaxFanout {
				return s, p.fail(fmt.Sprintf("want a fanout of 1 to %d", MaxFanout))
			}
			if n > 1 {
				s.Fanout = n
			}
		}
		if !p.expect(')') {
			return s, p.fail("want ')' closing the call")
		}
		return s, nil
	}
	for {
		if len(s.Parts) >= MaxNodes {
			return s, p.fail(fmt.Sprintf("more than %d nodes", MaxNodes))
		}
		part, err := p.shape(depth + 1)
		if err != nil {
			return s, err
		}
		s.Parts = append(s.Parts, part)
		if p.expect(')') {
			return s, nil
		}
		if !p.expect(',') {
			return s, p.fail("want ',' or ')' after a part")
		}
	}
}

// ParseLane reads a lane as a command line gives it, NAME=RUNS:SHAPE
// ("interactive=20:par(call(exa,3),call(exa,3))"), and checks its parts.
func ParseLane(text string) (toolplane.Lane, error) {
	name, rest, ok := strings.Cut(text, "=")
	if !ok {
		return toolplane.Lane{}, &InvalidError{"lane", "want NAME=RUNS:SHAPE, as interactive=20:par(call(exa,3),call(exa,3))"}
	}
	runs, shape, ok := strings.Cut(rest, ":")
	if !ok {
		return toolplane.Lane{}, &InvalidError{"lane", "want NAME=RUNS:SHAPE: the active run limit, a colon, then the run's shape"}
	}
	l := toolplane.Lane{Name: strings.TrimSpace(name)}
	n, err := strconv.ParseInt(strings.TrimSpace(runs), 10, 64)
	if err != nil || n < 1 || n > MaxActiveRuns {
		return l, &InvalidError{"lane", fmt.Sprintf("%q: want the lane's active run limit, 1 to %d", clip(runs), MaxActiveRuns)}
	}
	l.ActiveRuns = n
	if l.Shape, err = Parse(shape); err != nil {
		return l, err
	}
	return l, nil
}
