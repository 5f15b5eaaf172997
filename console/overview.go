package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/signin"
	"github.com/toolplane/toolplane/traffic"
)

func (c *Console) overviewRoutes(mux *http.ServeMux) {
	mux.Handle("GET "+Path+"/overview", c.page(c.overview))
}

// overviewPage is the traffic overview: the organization's calls of the
// window, in figures, two charts and a line per tool and per agent.
type overviewPage struct {
	frame
	Traffic trafficView
	Tools   []lineView
	Agents  []lineView
	Spend   chartView
	// Truncated: more tools or agents were counted than are listed.
	Truncated bool
}

// trafficView is what the overview and a tool's panel both show: the
// window's links, its figures and its calls' chart.
type trafficView struct {
	// Heading titles the panel where the page has other sections.
	Heading string
	Window  traffic.Window
	Windows []windowLink
	From    string
	Until   string
	Total   figuresView
	Calls   chartView
}

// windowLink is a link to the same page over another window.
type windowLink struct {
	Title, Href string
	Current     bool
}

// figuresView is traffic.Figures written for a person to read.
type figuresView struct {
	Calls, Held          int64
	ErrorRate, Refusals  string
	P50, P95, P99, Spend string
}

type lineView struct {
	Name string
	figuresView
}

// chartView is a bar chart drawn as SVG on the server: no script draws
// it, and no style attribute (the console's CSP allows neither) places
// it; its rectangles carry their geometry and colour as SVG attributes.
type chartView struct {
	// Label says what the chart shows, for a screen reader; Top the
	// value of its full height; First and Last its first and last steps'
	// times.
	Label, Top, First, Last string
	Width, Height           int
	Bars                    []barView
}

// barView is one step of a chart: its segments stacked from the bottom,
// and the words its tooltip shows.
type barView struct {
	Title    string
	Segments []segment
}

// segment is one rectangle of a bar, in the chart's coordinates.
type segment struct {
	X, Y, W, H string
	Class      string
	Fill       string
}

// The charts' size, in their own coordinates: the SVG is scaled to the
// page's width, so these fix only its proportions.
const chartWidth, chartHeight = 600, 120

// The colours of a chart's segments, as SVG fill attributes: calls that
// ran, refusals, failures, and spend.
const (
	fillCalls   = "#4f7fd9"
	fillRefused = "#d9a13b"
	fillFailed  = "#c8453b"
	fillSpend   = "#3f9b6e"
)

func (c *Console) overview(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	if c.cfg.Traffic == nil {
		return fmt.Errorf("%w: the traffic overview is not enabled on this server", toolplane.ErrNotFound)
	}
	window := traffic.Window(r.URL.Query().Get("window"))
	if window == "" {
		window = traffic.Hour
	}
	o, err := c.cfg.Traffic.Overview(r.Context(), sess.Credential, window, "")
	if err != nil {
		return err
	}
	v := overviewPage{frame: c.frameFor(sess, "Traffic overview", "overview"), Traffic: c.trafficView(o, c.path("/overview")),
		Tools: lines(o.Tools), Agents: lines(o.Agents), Truncated: o.Truncated}
	v.Spend = spendChart(o)
	c.render(w, r, http.StatusOK, "overview", v)
	return nil
}

// toolTraffic answers the traffic panel of tool's page at page, over the
// window r asks for (the last day unless it says hour); nil when the
// console serves no overview or the person may not read the trail (the
// traffic service decides).
func (c *Console) toolTraffic(r *http.Request, sess *signin.Session, tool, page string) (*trafficView, error) {
	if c.cfg.Traffic == nil {
		return nil, nil
	}
	window := traffic.Day
	if r.URL.Query().Get("window") == string(traffic.Hour) {
		window = traffic.Hour
	}
	o, err := c.cfg.Traffic.Overview(r.Context(), sess.Credential, window, tool)
	if errors.Is(err, toolplane.ErrForbidden) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v := c.trafficView(o, page)
	v.Heading = "Traffic, all nodes (from the audit trail)"
	return &v, nil
}

// trafficView answers o's figures and calls' chart, with links to page
// over each window.
func (c *Console) trafficView(o *traffic.Overview, page string) trafficView {
	v := trafficView{Window: o.Window, From: o.From.Format("2006-01-02 15:04"), Until: o.Until.Format("2006-01-02 15:04 UTC"),
		Total: figures(o.Total), Calls: callsChart(o)}
	for _, w := range traffic.Windows {
		title := "Last hour"
		if w == traffic.Day {
			title = "Last day"
		}
		v.Windows = append(v.Windows, windowLink{Title: title, Href: page + "?window=" + url.QueryEscape(string(w)), Current: w == o.Window})
	}
	return v
}

func figures(f traffic.Figures) figuresView {
	v := figuresView{Calls: f.Calls, Held: f.Held, ErrorRate: percent(f.ErrorRate()), Refusals: percent(f.RefusalRate()), Spend: cents(f.CostCents),
		P50: latency(f.P50), P95: latency(f.P95), P99: latency(f.P99)}
	return v
}

func lines(ls []traffic.Line) []lineView {
	out := make([]lineView, len(ls))
	for i, l := range ls {
		out[i] = lineView{Name: l.Name, figuresView: figures(l.Figures)}
	}
	return out
}

// percent writes a share as a percentage a person reads at a glance.
func percent(r float64) string {
	switch {
	case r == 0:
		return "0%"
	case r < 0.001:
		return "<0.1%"
	case r < 0.1:
		return strconv.FormatFloat(r*100, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(r*100, 'f', 0, 64) + "%"
}

// latency writes an estimated latency; none ran is a dash.
func latency(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < time.Millisecond:
		return strconv.FormatInt(d.Microseconds(), 10) + " µs"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
}

// stepTime writes when a step of o starts: the clock time within an hour
// or a day.
func stepTime(t time.Time) string { return t.Format("15:04") }

// callsChart draws o's calls step by step: those that ran at the bottom,
// the refused above them, the failed on top.
func callsChart(o *traffic.Overview) chartView {
	var top int64
	for _, s := range o.Steps {
		top = max(top, s.Calls)
	}
	ch := newChart(o, "Calls per "+stepName(o.Step)+", by how they ended", strconv.FormatInt(top, 10)+" calls")
	for i, s := range o.Steps {
		ran := s.Calls - s.Refused - s.Failed
		title := fmt.Sprintf("%s: %d call%s, %d refused, %d failed", stepTime(s.Start), s.Calls, plural(s.Calls), s.Refused, s.Failed)
		ch.Bars = append(ch.Bars, ch.bar(i, len(o.Steps), top, title, []int64{ran, s.Refused, s.Failed},
			[]string{"ran", "refused", "failed"}, []string{fillCalls, fillRefused, fillFailed}))
	}
	return ch
}

// spendChart draws o's spend step by step.
func spendChart(o *traffic.Overview) chartView {
	var top int64
	for _, s := range o.Steps {
		top = max(top, s.CostCents)
	}
	ch := newChart(o, "Spend per "+stepName(o.Step), cents(top))
	for i, s := range o.Steps {
		ch.Bars = append(ch.Bars, ch.bar(i, len(o.Steps), top, stepTime(s.Start)+": "+cents(s.CostCents), []int64{s.CostCents},
			[]string{"spend"}, []string{fillSpend}))
	}
	return ch
}

func newChart(o *traffic.Overview, label, top string) chartView {
	ch := chartView{Label: label, Top: top, Width: chartWidth, Height: chartHeight}
	if len(o.Steps) > 0 {
		ch.First, ch.Last = stepTime(o.Steps[0].Start), stepTime(o.Steps[len(o.Steps)-1].Start)
	}
	return ch
}

// bar answers step i of n: its values stacked from the bottom, scaled so
// top fills the chart's height.
func (ch chartView) bar(i, n int, top int64, title string, values []int64, classes, fills []string) barView {
	b := barView{Title: title}
	slot := float64(ch.Width) / float64(n)
	x, w := float64(i)*slot+slot*0.1, slot*0.8
	y := float64(ch.Height)
	for k, v := range values {
		if v <= 0 || top <= 0 {
			continue
		}
		h := float64(v) / float64(top) * float64(ch.Height)
		y -= h
		b.Segments = append(b.Segments, segment{X: coord(x), Y: coord(y), W: coord(w), H: coord(h), Class: classes[k], Fill: fills[k]})
	}
	return b
}

func coord(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

func stepName(d time.Duration) string {
	if d == time.Minute {
		return "minute"
	}
	return "half hour"
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}
