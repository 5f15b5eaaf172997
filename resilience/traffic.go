package resilience

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolplane/toolplane"
)

// The defaults of the caps. A zero field of Config takes its default; a
// negative one turns the cap off.
const (
	// DefaultToolMaxInFlight caps one tool's calls on a node, unless its
	// definition's execution block says otherwise.
	DefaultToolMaxInFlight = 100
	// DefaultAgentMaxInFlight caps one agent's calls (or, for a caller
	// that names no agent, one principal's) on a node.
	DefaultAgentMaxInFlight = 20
	// DefaultOrgMaxInFlight caps one organization's calls on a node.
	DefaultOrgMaxInFlight = 500
	// DefaultTargetMaxInFlight caps one organization's calls to one
	// downstream target (a host, a database, an upstream server, a Go
	// handler) on a node.
	DefaultTargetMaxInFlight = 200
	// DefaultNodeMaxInFlight is the node's hard cap on calls in flight:
	// at it, even critical work is shed.
	DefaultNodeMaxInFlight = 2000
	// DefaultNodeMaxGoroutines is the goroutine count the node treats as
	// saturated.
	DefaultNodeMaxGoroutines = 50000
	// DefaultShedLowAt and DefaultShedNormalAt are the fractions of
	// saturation at which low, then normal, work is shed.
	DefaultShedLowAt    = 0.8
	DefaultShedNormalAt = 0.9
	// SampleEvery is how often the goroutine count and heap are read.
	SampleEvery = 100 * time.Millisecond
)

// Config sets a node's traffic protections.
type Config struct {
	// ToolMaxInFlight is the cap of a tool whose definition sets none.
	ToolMaxInFlight int
	// AgentMaxInFlight caps each agent's calls.
	AgentMaxInFlight int
	// OrgMaxInFlight caps each organization's calls; OrgOverrides sets it
	// for named organizations.
	OrgMaxInFlight int
	OrgOverrides   map[string]int
	// TargetMaxInFlight caps each organization's calls to each downstream
	// target.
	TargetMaxInFlight int
	// NodeMaxInFlight, NodeMaxGoroutines and NodeMaxHeap (bytes; zero:
	// not watched) say when the node is saturated; the node sheds low work
	// from ShedLowAt of any of them, normal work from ShedNormalAt, and
	// critical work at saturation.
	NodeMaxInFlight   int
	NodeMaxGoroutines int
	NodeMaxHeap       int64
	ShedLowAt         float64
	ShedNormalAt      float64
	// Breaker sets every breaker's thresholds.
	Breaker BreakerConfig
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

func orDefault(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0 // off
	}
	return v
}

// Traffic is one node's traffic protections: its breakers, bulkheads and
// load shedder. It is safe for concurrent use.
type Traffic struct {
	cfg Config
	now func() time.Time

	breakers sync.Map // breakerKey -> *Breaker

	tools, agents, orgs, targets gate
	inFlight                     atomic.Int64
	// pressure is the last sampled saturation of goroutines and heap, as
	// float64 bits; sampledAt when, in UnixNano.
	pressure  atomic.Uint64
	sampledAt atomic.Int64

	refused sync.Map // reason -> *atomic.Int64
}

// New answers a node's protections.
func New(cfg Config) *Traffic {
	cfg.ToolMaxInFlight = orDefault(cfg.ToolMaxInFlight, DefaultToolMaxInFlight)
	cfg.AgentMaxInFlight = orDefault(cfg.AgentMaxInFlight, DefaultAgentMaxInFlight)
	cfg.OrgMaxInFlight = orDefault(cfg.OrgMaxInFlight, DefaultOrgMaxInFlight)
	cfg.TargetMaxInFlight = orDefault(cfg.TargetMaxInFlight, DefaultTargetMaxInFlight)
	cfg.NodeMaxInFlight = orDefault(cfg.NodeMaxInFlight, DefaultNodeMaxInFlight)
	cfg.NodeMaxGoroutines = orDefault(cfg.NodeMaxGoroutines, DefaultNodeMaxGoroutines)
	if cfg.ShedLowAt <= 0 || cfg.ShedLowAt > 1 {
		cfg.ShedLowAt = DefaultShedLowAt
	}
	if cfg.ShedNormalAt <= 0 || cfg.ShedNormalAt > 1 {
		cfg.ShedNormalAt = DefaultShedNormalAt
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Traffic{cfg: cfg, now: cfg.Now}
}

// Request is what a call tells the protections before it runs.
type Request struct {
	Organization string
	// Agent is the calling agent, or the principal of a caller that names
	// none.
	Agent string
	Tool  string
	// ToolMaxInFlight is the tool definition's own cap (zero: the
	// default).
	ToolMaxInFlight int
	// Target names the downstream the call reaches.
	Target   string
	Priority toolplane.Priority
}

// The reasons a call is refused, as metrics and tests name them.
const (
	ReasonBreaker = "breaker_open"
	ReasonTool    = "tool_in_flight"
	ReasonAgent   = "agent_in_flight"
	ReasonOrg     = "organization_in_flight"
	ReasonTarget  = "target_in_flight"
	ReasonShed    = "shed"
)

// Refusal is a call the protections turned away, before anything ran.
type Refusal struct {
	// Reason is one of the Reason constants.
	Reason string
	// Code is rate_limited for the caller's own caps (agent,
	// organization), unavailable otherwise.
	Code toolplane.Code
	// Wait is when the call may succeed.
	Wait time.Duration
}

// Ticket is an admitted call's hold on the protections. The caller's
// slots (agent, organization) are given back when the call answers
// (EndCall); the downstream's (tool, target, the node's in-flight count)
// when its handler has really ended (EndWork), which for a handler still
// running past its timeout is later: until then it still holds the
// downstream, and the caps must count it or they would not protect it.
type Ticket struct {
	t       *Traffic
	req     Request
	breaker *Breaker
	// probe is set while the call holds the half-open probe.
	probe          atomic.Bool
	callOnce, work sync.Once
}

// Admit admits a call or refuses it at once. A call admitted holds a
// Ticket, which it must end both ways (EndCall, EndWork) on every ending.
func (t *Traffic) Admit(r Request) (*Ticket, *Refusal) {
	if ref := t.shed(r.Priority); ref != nil {
		return nil, ref
	}
	br := t.Breaker(r.Organization, r.Tool, r.Target)
	ok, probe, wait := br.Allow()
	if !ok {
		return nil, t.refuse(ReasonBreaker, toolplane.CodeUnavailable, wait)
	}
	undo := func() {
		if probe {
			br.Record(Neutral, true)
		}
	}
	toolCap := t.cfg.ToolMaxInFlight
	if r.ToolMaxInFlight > 0 {
		toolCap = r.ToolMaxInFlight
	}
	orgCap := t.cfg.OrgMaxInFlight
	if v, ok := t.cfg.OrgOverrides[r.Organization]; ok {
		orgCap = max(v, 0)
	}
	steps := [...]struct {
		g      *gate
		key    gateKey
		cap    int
		reason string
		code   toolplane.Code
	}{
		{&t.agents, gateKey{r.Organization, r.Agent}, t.cfg.AgentMaxInFlight, ReasonAgent, toolplane.CodeRateLimited},
		{&t.orgs, gateKey{"", r.Organization}, orgCap, ReasonOrg, toolplane.CodeRateLimited},
		{&t.tools, gateKey{r.Organization, r.Tool}, toolCap, ReasonTool, toolplane.CodeUnavailable},
		// A target is counted per organization: a target names a kind of
		// downstream (database:PROVIDER, connection:PROVIDER) whose real
		// database or base URL is each organization's own, so one
		// organization's hanging downstream must not fill the cap another's
		// healthy one is counted under.
		{&t.targets, gateKey{r.Organization, r.Target}, t.cfg.TargetMaxInFlight, ReasonTarget, toolplane.CodeUnavailable},
	}
	for i, s := range steps {
		if !s.g.acquire(s.key, s.cap) {
			for _, done := range steps[:i] {
				done.g.release(done.key)
			}
			undo()
			return nil, t.refuse(s.reason, s.code, time.Second)
		}
	}
	t.inFlight.Add(1)
	tk := &Ticket{t: t, req: r, breaker: br}
	tk.probe.Store(probe)
	return tk, nil
}

func (t *Traffic) refuse(reason string, code toolplane.Code, wait time.Duration) *Refusal {
	v, _ := t.refused.LoadOrStore(reason, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	return &Refusal{Reason: reason, Code: code, Wait: max(wait, time.Second)}
}

// Record counts one handler attempt's ending against the call's breaker.
// The first ending of the half-open probe decides the breaker.
func (k *Ticket) Record(o Outcome) {
	k.breaker.Record(o, k.probe.Swap(false))
}

// Passing reports whether the call may attempt its downstream again: only
// while its breaker is closed. A breaker that opened since the call was
// admitted, or that is half-open (this call's own probe attempt has ended,
// or another call probes), says the downstream is failing, and every
// further attempt would only add to its load; wait is then when the
// breaker will let a call through.
func (k *Ticket) Passing() (ok bool, wait time.Duration) {
	return k.breaker.Closed()
}

// EndCall gives back the caller's slots (agent, organization), and the
// probe of a call that ended without reaching its downstream. It is safe
// to call more than once.
func (k *Ticket) EndCall() {
	k.callOnce.Do(func() {
		if k.probe.Swap(false) {
			k.breaker.Record(Neutral, true)
		}
		k.t.agents.release(gateKey{k.req.Organization, k.req.Agent})
		k.t.orgs.release(gateKey{"", k.req.Organization})
	})
}

// EndWork gives back the downstream's slots (tool, target, the node's
// count). It is safe to call more than once.
func (k *Ticket) EndWork() {
	k.work.Do(func() {
		k.t.tools.release(gateKey{k.req.Organization, k.req.Tool})
		k.t.targets.release(gateKey{k.req.Organization, k.req.Target})
		k.t.inFlight.Add(-1)
	})
}

// Breaker answers the breaker of org's tool on target, made on first use.
func (t *Traffic) Breaker(org, tool, target string) *Breaker {
	k := breakerKey{org, tool, target}
	if b, ok := t.breakers.Load(k); ok {
		return b.(*Breaker)
	}
	b, _ := t.breakers.LoadOrStore(k, NewBreaker(t.cfg.Breaker, t.now))
	return b.(*Breaker)
}

type breakerKey struct{ org, tool, target string }

// BreakerView is one breaker's status with what it guards.
type BreakerView struct {
	Organization, Tool, Target string
	BreakerStatus
}

// Breakers answers the status of the breakers of org's tool (every
// organization's and tool's when both are empty), by target.
func (t *Traffic) Breakers(org, tool string) []BreakerView {
	var out []BreakerView
	t.breakers.Range(func(k, v any) bool {
		bk := k.(breakerKey)
		if (org == "" && tool == "") || (bk.org == org && bk.tool == tool) {
			out = append(out, BreakerView{Organization: bk.org, Tool: bk.tool, Target: bk.target, BreakerStatus: v.(*Breaker).Status()})
		}
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Organization != b.Organization {
			return a.Organization < b.Organization
		}
		if a.Tool != b.Tool {
			return a.Tool < b.Tool
		}
		return a.Target < b.Target
	})
	return out
}

// Occupancy is what the bulkheads hold now.
type Occupancy struct {
	// InFlight is the node's calls in flight, of NodeMax.
	InFlight, NodeMax int64
	// Tools and Targets (by organization and tool or target, joined by a
	// slash), Organizations and Agents count the calls each holds.
	Tools, Targets, Organizations map[string]int
	// Agents is only the number of agents with calls in flight: agents
	// are too many to list.
	Agents int
	// ToolCaps, TargetCaps and OrganizationCaps hold the cap each key of
	// Tools, Targets and Organizations was admitted under (0: none): what
	// the metrics show saturation against.
	ToolCaps, TargetCaps, OrganizationCaps map[string]int
	// Refused counts the calls refused, by reason, since start.
	Refused map[string]int64
	// Pressure is the last sampled saturation (0..1+) of goroutines and
	// heap.
	Pressure float64
}

// Occupancy answers what the bulkheads hold now.
func (t *Traffic) Occupancy() Occupancy {
	o := Occupancy{InFlight: t.inFlight.Load(), NodeMax: int64(t.cfg.NodeMaxInFlight),
		Refused: map[string]int64{}, Pressure: t.sampled()}
	o.Tools, o.ToolCaps = t.tools.snapshotWithLimits()
	o.Targets, o.TargetCaps = t.targets.snapshotWithLimits()
	o.Organizations, o.OrganizationCaps = t.orgs.snapshotWithLimits()
	o.Agents = t.agents.size()
	t.refused.Range(func(k, v any) bool {
		o.Refused[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return o
}

// ToolInFlight answers how many calls of org's tool run on this node.
func (t *Traffic) ToolInFlight(org, tool string) int {
	return t.tools.count(gateKey{org, tool})
}

// shed refuses work of priority p when the node is too near saturation
// for it.
func (t *Traffic) shed(p toolplane.Priority) *Refusal {
	pr := t.sampled()
	if n := t.cfg.NodeMaxInFlight; n > 0 {
		pr = max(pr, float64(t.inFlight.Load())/float64(n))
	}
	var limit float64
	switch p {
	case toolplane.PriorityLow:
		limit = t.cfg.ShedLowAt
	case toolplane.PriorityCritical:
		limit = 1
	default:
		limit = t.cfg.ShedNormalAt
	}
	if pr < limit {
		return nil
	}
	return t.refuse(ReasonShed, toolplane.CodeUnavailable, time.Second)
}

// sampled answers the saturation of goroutines and heap, read again when
// the last reading is older than SampleEvery: one call in many pays for a
// reading, which costs a few microseconds.
func (t *Traffic) sampled() float64 {
	now := t.now().UnixNano()
	last := t.sampledAt.Load()
	if now-last >= int64(SampleEvery) && t.sampledAt.CompareAndSwap(last, now) {
		var p float64
		if n := t.cfg.NodeMaxGoroutines; n > 0 {
			p = float64(runtime.NumGoroutine()) / float64(n)
		}
		if n := t.cfg.NodeMaxHeap; n > 0 {
			s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
			metrics.Read(s)
			if s[0].Value.Kind() == metrics.KindUint64 {
				p = max(p, float64(s[0].Value.Uint64())/float64(n))
			}
		}
		t.pressure.Store(floatBits(p))
		return p
	}
	return floatFrom(t.pressure.Load())
}

// Message answers what a model reads of a refusal of tool (its model
// name).
func (r *Refusal) Message(tool string) string {
	secs := max(1, int((r.Wait+time.Second-1)/time.Second))
	switch r.Reason {
	case ReasonBreaker:
		return fmt.Sprintf("%s is failing for now: its downstream kept failing, so the call was not sent; nothing was done. Try again in %d s, or use another tool.", tool, secs)
	case ReasonAgent:
		return fmt.Sprintf("too many of your calls are running at once; %s was not called and nothing was done. Wait for some to finish and try again in %d s.", tool, secs)
	case ReasonOrg:
		return fmt.Sprintf("your organization has too many calls running at once; %s was not called and nothing was done. Try again in %d s.", tool, secs)
	case ReasonShed:
		return fmt.Sprintf("the platform is too busy to take this call now; %s was not called and nothing was done. Try again in %d s.", tool, secs)
	}
	return fmt.Sprintf("%s is at its capacity now; the call was not sent and nothing was done. Try again in %d s.", tool, secs)
}
