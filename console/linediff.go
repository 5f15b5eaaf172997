package console

import "strings"

// diffOp says what a line of a diff is: kept from the old text, added in
// the new one, or removed from the old one.
type diffOp byte

const (
	diffKept    diffOp = ' '
	diffAdded   diffOp = '+'
	diffRemoved diffOp = '-'
)

// diffLine is one line of a line diff. A gap (Skipped > 0) stands for
// that many kept lines left out between the changes' context.
type diffLine struct {
	Op      diffOp
	Text    string
	Skipped int
}

// Mark answers the line's marker as the page shows it: "+", "-" or " ".
func (l diffLine) Mark() string { return string(l.Op) }

// Class answers the line's CSS class.
func (l diffLine) Class() string {
	switch l.Op {
	case diffAdded:
		return "added"
	case diffRemoved:
		return "removed"
	}
	return "kept"
}

// maxDiffCells bounds the table the longest common subsequence is found
// with (lines of the old text times lines of the new, past their common
// head and tail): a bundle's files are at most MaxFileBytes each, and two
// unrelated files of thousands of lines are shown as one removed and one
// added rather than costing a page view hundreds of megabytes.
const maxDiffCells = 4 << 20

// lineDiff answers the lines of a turned into those of b: every line of
// both once, in order, marked kept, removed or added, by their longest
// common subsequence of lines. The removed lines of a change come before
// its added ones.
func lineDiff(a, b string) []diffLine {
	x, y := splitLines(a), splitLines(b)
	var head, tail []diffLine
	for len(x) > 0 && len(y) > 0 && x[0] == y[0] {
		head = append(head, diffLine{Op: diffKept, Text: x[0]})
		x, y = x[1:], y[1:]
	}
	for len(x) > 0 && len(y) > 0 && x[len(x)-1] == y[len(y)-1] {
		tail = append(tail, diffLine{Op: diffKept, Text: x[len(x)-1]})
		x, y = x[:len(x)-1], y[:len(y)-1]
	}
	out := head
	if len(x)*len(y) > maxDiffCells {
		for _, l := range x {
			out = append(out, diffLine{Op: diffRemoved, Text: l})
		}
		for _, l := range y {
			out = append(out, diffLine{Op: diffAdded, Text: l})
		}
	} else {
		out = append(out, lcsDiff(x, y)...)
	}
	for i := len(tail) - 1; i >= 0; i-- {
		out = append(out, tail[i])
	}
	return out
}

// lcsDiff is lineDiff of x and y by the table of their suffixes' longest
// common subsequences.
func lcsDiff(x, y []string) []diffLine {
	n, m := len(x), len(y)
	// l[i*(m+1)+j] is the length of the LCS of x[i:] and y[j:].
	l := make([]int32, (n+1)*(m+1))
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				l[i*(m+1)+j] = l[(i+1)*(m+1)+j+1] + 1
			} else {
				l[i*(m+1)+j] = max(l[(i+1)*(m+1)+j], l[i*(m+1)+j+1])
			}
		}
	}
	out := make([]diffLine, 0, n+m)
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case x[i] == y[j]:
			out = append(out, diffLine{Op: diffKept, Text: x[i]})
			i, j = i+1, j+1
		case l[(i+1)*(m+1)+j] >= l[i*(m+1)+j+1]:
			out = append(out, diffLine{Op: diffRemoved, Text: x[i]})
			i++
		default:
			out = append(out, diffLine{Op: diffAdded, Text: y[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, diffLine{Op: diffRemoved, Text: x[i]})
	}
	for ; j < m; j++ {
		out = append(out, diffLine{Op: diffAdded, Text: y[j]})
	}
	return out
}

// splitLines answers s's lines without their line ends; "" has none, and
// a last line end does not make an empty last line.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(strings.ReplaceAll(s, "\r\n", "\n"), "\n"), "\n")
}

// diffContext is how many kept lines are shown either side of a change.
const diffContext = 3

// folded answers d with the kept lines further than diffContext from
// any change folded into gaps, so a page shows the changes of a long file
// and not the file.
func folded(d []diffLine) []diffLine {
	near := make([]bool, len(d))
	for i, l := range d {
		if l.Op == diffKept {
			continue
		}
		for k := max(0, i-diffContext); k <= min(len(d)-1, i+diffContext); k++ {
			near[k] = true
		}
	}
	var out []diffLine
	for i := 0; i < len(d); {
		if d[i].Op != diffKept || near[i] {
			out = append(out, d[i])
			i++
			continue
		}
		j := i
		for j < len(d) && d[j].Op == diffKept && !near[j] {
			j++
		}
		out = append(out, diffLine{Op: diffKept, Skipped: j - i})
		i = j
	}
	return out
}
