package door

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// maxTimeout is the longest timeout a caller's value is read as: any
// longer is the same to the invoker (a tool's own timeout is far
// shorter), and a duration this size cannot overflow.
const maxTimeout = 100 * 365 * 24 * time.Hour

// ErrTimeout is the cause of a timeout value a door could not read.
var ErrTimeout = errors.New("a timeout is a positive number")

// ParseTimeoutSeconds reads a timeout given in seconds, as the
// Request-Timeout header carries it: digits with at most one decimal
// point ("2", "0.250", "1.5"), like Retry-After's seconds with a fraction
// allowed. No sign, exponent, hexadecimal, infinity or NaN; zero is not a
// timeout. A value past a century is read as a century.
func ParseTimeoutSeconds(v string) (time.Duration, error) {
	dots, digits := 0, 0
	for _, r := range v {
		switch {
		case r == '.':
			dots++
		case r >= '0' && r <= '9':
			digits++
		default:
			digits = -1
		}
		if digits < 0 || dots > 1 {
			break
		}
	}
	if digits <= 0 || dots > 1 {
		return 0, fmt.Errorf("%w of seconds, such as 2 or 0.5; %q is not", ErrTimeout, v)
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || s <= 0 {
		return 0, fmt.Errorf("%w of seconds, such as 2 or 0.5; %q is not", ErrTimeout, v)
	}
	return clampTimeout(s * float64(time.Second)), nil
}

// TimeoutMillis reads a timeout given in milliseconds, as a request body's
// timeout_ms or an MCP call's _meta carries it (a JSON number; a fraction
// is kept). A value that is not positive and finite answers ErrTimeout.
func TimeoutMillis(ms float64) (time.Duration, error) {
	if math.IsNaN(ms) || math.IsInf(ms, 0) || ms <= 0 {
		return 0, fmt.Errorf("%w of milliseconds; %v is not", ErrTimeout, ms)
	}
	return clampTimeout(ms * float64(time.Millisecond)), nil
}

func clampTimeout(ns float64) time.Duration {
	if ns >= float64(maxTimeout) {
		return maxTimeout
	}
	return max(time.Duration(ns), 1)
}

// Tighter answers the tighter of two timeouts, where zero is none.
func Tighter(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}
