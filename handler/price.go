package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/toolplane/toolplane"
)

// ErrUnpriced is wrapped by the fault a priced call reports when its
// answer does not state a cost the meter can count.
var ErrUnpriced = errors.New("the answer does not state a countable price")

// Charge reports the cost of a call of a tool with price p (one that
// succeeded) to the meter: p's fixed Cents, or the sum of stated, the
// values the answer holds at p's Field (one for an HTTP body, one per row
// for a SQL result). A stated value that is missing (nil), not a number,
// negative, or that takes the sum past p's MaxCents is reported as a meter
// fault (ReportUsageFault): the call's answer is then withheld, since the
// run cannot count it. A fraction of a cent is counted as a whole one. A
// platform runtime calls it; a handler reports its own cost (ReportUsage).
func Charge(ctx context.Context, p *toolplane.Price, stated ...any) {
	if p == nil {
		return
	}
	if p.Field == "" {
		_ = ReportUsage(ctx, p.Cents, 1)
		return
	}
	cents, err := statedCents(p, stated)
	if err != nil {
		_ = ReportUsageFault(ctx, err)
		return
	}
	_ = ReportUsage(ctx, cents, 1)
}

// statedCents sums the costs an answer states at a price's field.
func statedCents(p *toolplane.Price, stated []any) (int64, error) {
	if len(stated) == 0 {
		return 0, fmt.Errorf("%w: nothing at %s", ErrUnpriced, p.Field)
	}
	var sum float64
	for _, v := range stated {
		c, err := centsOf(v)
		if err != nil {
			return 0, fmt.Errorf("%w: %s %v", ErrUnpriced, p.Field, err)
		}
		sum += c
	}
	total := math.Ceil(sum)
	if total > float64(p.MaxCents) {
		return 0, fmt.Errorf("%w: %s states %v cents, past the tool's bound of %d", ErrUnpriced, p.Field, total, p.MaxCents)
	}
	return int64(total), nil
}

// centsOf reads one stated cost: a JSON number, a Go number or a numeric
// string (a SQL decimal column), never negative or infinite.
func centsOf(v any) (float64, error) {
	var f float64
	var err error
	switch x := v.(type) {
	case nil:
		return 0, errors.New("is missing")
	case json.Number:
		f, err = x.Float64()
	case string:
		f, err = strconv.ParseFloat(x, 64)
	case float64:
		f = x
	case int64:
		f = float64(x)
	case int:
		f = float64(x)
	default:
		return 0, fmt.Errorf("is a %T, not a number", v)
	}
	switch {
	case err != nil:
		return 0, errors.New("is not a number")
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, errors.New("is not a finite number")
	case f < 0:
		return 0, errors.New("is negative")
	}
	return f, nil
}
