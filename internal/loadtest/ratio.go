package loadtest

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Spread is the median and range of a set of figures: rounds of one cell,
// or one ratio taken round by round.
type Spread struct {
	Median, Min, Max float64
	// N is how many figures it is of.
	N int
}

// SpreadOf answers the median (the mean of the middle two of an even
// count) and range of xs; the zero Spread for none.
func SpreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	m := s[n/2]
	if n%2 == 0 {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	return Spread{Median: m, Min: s[0], Max: s[n-1], N: n}
}

// cpuOf answers the CPU per call of the processes in roles in r (the sum
// when several), and whether every one was measured and nonzero.
func cpuOf(r Result, roles ...string) (time.Duration, bool) {
	var total time.Duration
	for _, role := range roles {
		d, ok := r.RoleCPU(role)
		if !ok || d <= 0 {
			return 0, false
		}
		total += d
	}
	return total, true
}

// CPURatios answers, round by round, the CPU per call of the processes in
// rolesA of a's run over that of rolesB in b's run of the same round;
// rounds where either was not measured are left out. The two are measured
// within seconds of each other, so the ratio carries less of the host's
// drift than a ratio of two medians.
func CPURatios(a, b []Result, rolesA, rolesB []string) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		x, ok1 := cpuOf(a[i], rolesA...)
		y, ok2 := cpuOf(b[i], rolesB...)
		if ok1 && ok2 {
			out = append(out, float64(x)/float64(y))
		}
	}
	return out
}

// RateRatios answers, round by round, a's throughput over b's; rounds
// where b had none are left out.
func RateRatios(a, b []Result) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if rb := b[i].Rate(); rb > 0 {
			out = append(out, a[i].Rate()/rb)
		}
	}
	return out
}

// formatRatios renders ratios round by round with two decimals, then
// their median and range, e.g. "1.52 1.61 1.48 → median 1.52× (1.48–1.61)".
func formatRatios(ratios []float64) string {
	parts := make([]string, len(ratios))
	for i, r := range ratios {
		parts[i] = fmt.Sprintf("%.2f", r)
	}
	s := SpreadOf(ratios)
	return fmt.Sprintf("%s → median %.2f× (%.2f–%.2f, %d rounds)", strings.Join(parts, " "), s.Median, s.Min, s.Max, s.N)
}

// microseconds renders a spread of durations held as float64 nanoseconds
// in microseconds: "123 (110–140)".
func microseconds(s Spread) string {
	if s.N == 0 {
		return "–"
	}
	if s.N == 1 {
		return fmt.Sprintf("%.0f", s.Median/1e3)
	}
	return fmt.Sprintf("%.0f (%.0f–%.0f)", s.Median/1e3, s.Min/1e3, s.Max/1e3)
}

// Cell is every round of one target at one client count.
type Cell struct {
	Target  string
	Clients int
	Rounds  []Result
}

// WriteProcessTable writes, for each cell, throughput and latency as the
// median of its rounds with their range, and the CPU per call of each
// server process the calls pass through, in µs, the same way. A column
// is shown only for roles some cell measured; "–" where a cell's calls
// do not pass through that process (or it was not measured).
func WriteProcessTable(w io.Writer, cells []Cell) error {
	var roles []string
	for _, role := range Roles {
		if slices.ContainsFunc(cells, func(c Cell) bool {
			return slices.ContainsFunc(c.Rounds, func(r Result) bool { _, ok := r.RoleCPU(role); return ok })
		}) {
			roles = append(roles, role)
		}
	}
	var b strings.Builder
	b.WriteString("| target | clients | calls/s | p50 ms | p99 ms |")
	sep := "| --- | ---: | ---: | ---: | ---: |"
	for _, role := range roles {
		b.WriteString(" " + role + " µs/call |")
		sep += " ---: |"
	}
	b.WriteString(" all servers µs/call |\n" + sep + " ---: |\n")
	for _, c := range cells {
		var rate, p50, p99, total []float64
		perRole := map[string][]float64{}
		for _, r := range c.Rounds {
			rate = append(rate, r.Rate())
			p50 = append(p50, float64(r.P50))
			p99 = append(p99, float64(r.P99))
			if r.CPUPerCall > 0 {
				total = append(total, float64(r.CPUPerCall))
			}
			for _, p := range r.Processes {
				perRole[p.Role] = append(perRole[p.Role], float64(p.PerCall))
			}
		}
		rs := SpreadOf(rate)
		fmt.Fprintf(&b, "| %s | %d | %s (%s–%s) | %s | %s |", c.Target, c.Clients,
			thousands(int64(rs.Median+0.5)), thousands(int64(rs.Min+0.5)), thousands(int64(rs.Max+0.5)),
			millis(SpreadOf(p50)), millis(SpreadOf(p99)))
		for _, role := range roles {
			fmt.Fprintf(&b, " %s |", microseconds(SpreadOf(perRole[role])))
		}
		fmt.Fprintf(&b, " %s |\n", microseconds(SpreadOf(total)))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("loadtest: write process table: %w", err)
	}
	return nil
}

// millis renders a spread of durations held as float64 nanoseconds in
// milliseconds: "0.412 (0.380–0.530)".
func millis(s Spread) string {
	if s.N == 0 {
		return "–"
	}
	if s.N == 1 {
		return fmt.Sprintf("%.3f", s.Median/1e6)
	}
	return fmt.Sprintf("%.3f (%.3f–%.3f)", s.Median/1e6, s.Min/1e6, s.Max/1e6)
}
