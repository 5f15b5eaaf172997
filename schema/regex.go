package schema

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"slices"
)

// Regular expressions. Go's regexp is linear in its input, but the factor
// is the size of the compiled program: matching walks every live
// instruction for every input byte, so a pattern such as [a-z]{1000}b costs
// about a thousand steps per byte and a megabyte string takes a minute.
// Toolplane bounds both factors. At compile time each pattern (and each
// patternProperties name) may compile to at most Limits.MaxPatternProgram
// instructions, and all of a document's patterns together to at most
// Limits.MaxPatternTotal, which also bounds what compiling the schema
// costs. At validation time every match is charged its input length times
// its program size (cost.go), and a value over Limits.MaxRegexWork is
// refused unchecked before any pattern runs.

// A string validated against format "regex" is compiled, and compiling
// costs in proportion to the program built: a 1.7 KB string such as
// (?:x0y|x1y|…){1000} expands to nearly a million instructions and takes a
// quarter of a second. The work estimate charges that too, in matching
// steps: building one instruction costs about as much as compileStepsPerInst
// steps of matching (measured: charged this way, compiling a string near
// the limit takes less CPU per step than matching does).
const compileStepsPerInst = 16

// compileSteps estimates, in matching steps, the work of compiling s as a
// regular expression, saturated past stop. Parsing is linear in s; what
// follows is linear in the expanded program.
func compileSteps(s string, stop int64) int64 {
	parse := mulCount(int64(len(s)), compileStepsPerInst)
	if parse > stop {
		return parse // too long to compile, whatever it says
	}
	re, err := syntax.Parse(s, syntax.Perl)
	if err != nil {
		return parse // the validator stops at the same error
	}
	n := expandedSize(re, int(stop/compileStepsPerInst)+1)
	return addCount(parse, mulCount(int64(n), compileStepsPerInst))
}

// guardFactor bounds the programs counted exactly: a pattern whose repeats
// expand, before simplification, past guardFactor times the per-pattern
// limit is refused without being expanded, so a short pattern such as
// (?:…){1000} cannot make the check itself slow.
const guardFactor = 8

// errProgramTooLarge reports a pattern refused by the guard, before its
// program was built.
var errProgramTooLarge = errors.New("program too large to build")

// programSize answers the number of instructions expr compiles to, as the
// regexp package compiles it (Perl syntax, simplified). A pattern that does
// not parse answers 0 and no error: the schema compiler refuses it with its
// own message.
func programSize(expr string, limit int) (int, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return 0, nil
	}
	guard := guardFactor * limit
	if n := expandedSize(re, guard); n > guard {
		return n, errProgramTooLarge
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0, nil
	}
	return len(prog.Inst), nil
}

// expandedSize estimates, from the parsed tree, the instructions re
// compiles to once its counted repeats are expanded, stopping once the
// estimate passes stop. It follows the compiler's shape closely enough to
// decide when an exact count would be expensive; the exact count decides
// everything else.
func expandedSize(re *syntax.Regexp, stop int) int {
	sat := func(n int) int { return min(n, stop+1) }
	switch re.Op {
	case syntax.OpLiteral:
		return sat(len(re.Rune))
	case syntax.OpCapture:
		return sat(2 + expandedSize(re.Sub[0], stop))
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return sat(1 + expandedSize(re.Sub[0], stop))
	case syntax.OpRepeat:
		copies := max(re.Min, re.Max)
		if re.Max == -1 {
			copies = re.Min + 1
		}
		return sat(copies * (1 + expandedSize(re.Sub[0], stop)))
	case syntax.OpConcat, syntax.OpAlternate:
		n := len(re.Sub)
		for _, s := range re.Sub {
			if n = sat(n + expandedSize(s, stop)); n > stop {
				return n
			}
		}
		return n
	default:
		return 1
	}
}

// checkPatterns measures every regular expression in doc, refusing one over
// lim.MaxPatternProgram or a document whose patterns together pass
// lim.MaxPatternTotal. It answers each expression's program size, by its
// text, for the work estimate.
func checkPatterns(doc any, lim Limits) (map[string]int64, error) {
	sizes := map[string]int64{}
	total := 0
	measure := func(expr, at, what string) error {
		n, err := programSize(expr, lim.MaxPatternProgram)
		if errors.Is(err, errProgramTooLarge) {
			return &CompileError{Pointer: at, Reason: ErrTooComplex, Detail: fmt.Sprintf("%s's repeats expand to more than %d instructions, and the limit for one pattern is %d (MaxPatternProgram); every character of a value is matched against every instruction, so keep counted repeats such as {1000} small and bound the length with maxLength", what, guardFactor*lim.MaxPatternProgram, lim.MaxPatternProgram)}
		}
		if n > lim.MaxPatternProgram {
			return &CompileError{Pointer: at, Reason: ErrTooComplex, Detail: fmt.Sprintf("%s compiles to %d instructions, and the limit for one pattern is %d (MaxPatternProgram); every character of a value is matched against every instruction, so keep counted repeats such as {1000} small and bound the length with maxLength", what, n, lim.MaxPatternProgram)}
		}
		total += n
		if total > lim.MaxPatternTotal {
			return &CompileError{Pointer: at, Reason: ErrTooComplex, Detail: fmt.Sprintf("the schema's patterns, up to this one, compile to %d instructions, and the limit for one schema is %d (MaxPatternTotal); share patterns through $defs or simplify them", total, lim.MaxPatternTotal)}
		}
		sizes[expr] = int64(n)
		return nil
	}
	err := walkSchemas(doc, "", func(m map[string]any, at string) error {
		if p, ok := m["pattern"].(string); ok {
			if err := measure(p, at+"/pattern", "the pattern"); err != nil {
				return err
			}
		}
		if pp, ok := m["patternProperties"].(map[string]any); ok {
			for _, p := range sortedKeys(pp) {
				if err := measure(p, at+"/patternProperties/"+escape(p), "the patternProperties name"); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return sizes, err
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
