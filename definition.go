package toolplane

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Definition is the contract of one tool: what the model is told, what the
// platform checks, and how the call is bound to something that executes it.
// Its JSON form (with the same field names in YAML) is the file form that
// `toolplane lint` reads and the registry stores.
type Definition struct {
	// Name is the platform name, namespace.verb (payments.refund_order). It
	// keeps its dot everywhere it is stored; only the model-facing projection
	// rewrites it. mcp.<connection>.<remote> is reserved for tools ingested
	// from MCP servers.
	Name string `json:"name"`
	// Version is the semantic version of this definition (2.1.0).
	Version string `json:"version"`
	// Title, optional, is a short human-readable name (Refund an order),
	// shown to people and to MCP clients beside the name.
	Title string `json:"title,omitempty"`
	// Description is what the model reads to decide whether and how to call
	// the tool.
	Description string `json:"description"`
	// SearchHints, optional, are phrases a person might search for this
	// tool with that its description does not use (the words of its
	// users, its domain's synonyms: "give money back", "chargeback").
	// Search reads them; the model is not shown them.
	SearchHints []string `json:"search_hints,omitempty"`
	// InputSchema and OutputSchema are JSON Schema documents (draft 2020-12).
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema"`
	// ErrorSchema, optional, describes the business errors the tool answers.
	ErrorSchema json.RawMessage `json:"error_schema,omitempty"`
	// SchemaHash is the canonical hash of input and output schema. The loader
	// computes it; a file that states one must state the right one.
	SchemaHash string `json:"schema_hash,omitempty"`

	Kind    Kind    `json:"kind"`
	Binding Binding `json:"binding"`
	Effect  Effect  `json:"effect"`

	Annotations Annotations `json:"annotations"`

	// Connection is the provider key a connection resolver must satisfy
	// before the handler runs (a send tool always declares one).
	Connection string `json:"connection,omitempty"`
	// Timeout bounds the handler. Zero means the platform default.
	Timeout Duration `json:"timeout,omitempty"`
	// Retry safe lets a read be attempted again after a transient failure,
	// inside its timeout (Execution says how often). It is never set on a
	// write: a write is attempted again only when its binding makes that
	// one effect (a downstream that honours the key it is sent, or a
	// failure that rolled back), which the invoker reads from the binding.
	Retry Retry `json:"retry,omitempty"`
	// Replay lets a tool whose effect is safe to repeat run again after an
	// attempt ended without an answer of its own (crash, timeout, lost
	// worker), up to MaxAttempts starts in all. Nil: such an attempt becomes
	// an uncertain action that a person reconciles.
	Replay *Replay `json:"replay,omitempty"`
	// Execution shapes the tool's traffic: attempts inside its timeout,
	// how many of its calls run at once, how many a minute, and what is
	// shed first. Nil: the platform's defaults.
	Execution *Execution `json:"execution,omitempty"`
	// Metered tools write a usage row and pass accrual before they execute.
	Metered bool `json:"metered,omitempty"`
	// Price, on an http or sql tool (which has no handler of its own to
	// report what a call cost), is what each call that succeeds costs: the
	// runtime reports it to the meter. A priced tool is metered.
	Price *Price `json:"price,omitempty"`
	// Repeatable must be stated false for every write and send tool: two
	// identical calls in one run are one effect. It is absent for a read, and
	// true is refused.
	Repeatable *bool `json:"repeatable,omitempty"`
	// ApprovalPreview asks the handler's preview to render the approval line.
	ApprovalPreview bool `json:"approval_preview,omitempty"`
	// Approval says who answers an approval of this tool, how long each
	// waits, and what its expiry means. Nil: anyone the deployment lets
	// approve, the platform's wait, deny on expiry.
	Approval *ApprovalPolicy `json:"approval,omitempty"`
	// PolicyFacts names facts a policy rule may read about this call that the
	// arguments alone cannot answer; each needs a registered resolver.
	PolicyFacts []string `json:"policy_facts,omitempty"`
	// BatchArgument names the top-level array argument MaxBatchSize bounds.
	BatchArgument string `json:"batch_argument,omitempty"`
	MaxBatchSize  int    `json:"max_batch_size,omitempty"`
	// MaxResults keeps at most this many items of an array answer.
	MaxResults int `json:"max_results,omitempty"`
	// MaxOutputBytes lowers the platform byte bound (32 KiB); it never
	// raises it.
	MaxOutputBytes int `json:"max_output_bytes,omitempty"`
	// ItemKind is the resource kind of one item of the answer (crm.person);
	// it turns a Dropped marker into one that carries a ResourceRef.
	ItemKind string `json:"item_kind,omitempty"`

	Tags []string `json:"tags,omitempty"`
	// Classification is the data classification of what the tool
	// touches: public, internal, confidential or restricted. Policy rules
	// read it.
	Classification string `json:"classification,omitempty"`
	Owner          string `json:"owner,omitempty"`
	OnCall         string `json:"on_call,omitempty"`
	CostCenter     string `json:"cost_center,omitempty"`

	// Mode is sync unless the tool is long running.
	Mode Mode `json:"mode,omitempty"`

	// Dependencies are edges to other tools a planner reads with this one:
	// what must run first (its output feeds this tool) and what is usually
	// called beside it.
	Dependencies []Dependency `json:"dependencies,omitempty"`
}

// Price is what one call of an http or sql tool costs, set by the tool's
// owner when it is published: a fixed amount per call, or an amount the
// downstream states in its answer (a provider that reports what the call
// cost, in credits or cents), bounded by the owner.
type Price struct {
	// Cents is the fixed cost of each call that succeeds.
	Cents int64 `json:"cents,omitempty"`
	// Field, instead, names where the answer states the call's cost in
	// cents: a JSON pointer into an http response's body (/usage/cost),
	// or a column of a sql result, summed over the rows it answers. A
	// fraction of a cent is counted as a whole one, so a call is never
	// counted below what it cost.
	Field string `json:"field,omitempty"`
	// MaxCents bounds a cost read from Field: an answer stating more, or
	// a negative or missing cost, is a meter fault (the call's answer is
	// withheld and the fault reported), never a charge the owner did not
	// expect.
	MaxCents int64 `json:"max_cents,omitempty"`
}

// MaxPriceCents bounds any price a tool declares: a thousand dollars a
// call is past any metered API this platform fronts, so more is a typing
// mistake (cents taken for micros), not a price.
const MaxPriceCents int64 = 100_000

// Dependency is one edge from a tool to another.
type Dependency struct {
	// Relation is requires_output_of or commonly_paired_with.
	Relation string `json:"relation"`
	// Tool is the other tool's platform name, optionally with a version
	// range (payments.get_order@^1.0.0).
	Tool string `json:"tool"`
}

// The dependency relations.
const (
	RequiresOutputOf   = "requires_output_of"
	CommonlyPairedWith = "commonly_paired_with"
)

// Kind says where a tool's implementation comes from.
type Kind string

// The tool kinds.
const (
	KindInternal Kind = "internal"
	KindVendor   Kind = "vendor"
	KindMCP      Kind = "mcp"
)

// Effect says what a call does to the world. Write and send calls take an
// idempotency claim; a read does not.
type Effect string

// The effects.
const (
	EffectRead  Effect = "read"
	EffectWrite Effect = "write"
	EffectSend  Effect = "send"
)

// Writes reports whether the effect changes the world (write or send).
func (e Effect) Writes() bool { return e == EffectWrite || e == EffectSend }

// Retry says whether a call may be retried inside its timeout.
type Retry string

// The retry policies.
const (
	RetryNone Retry = "none"
	RetrySafe Retry = "safe"
)

// Mode is how a call executes.
type Mode string

// The execution modes.
const (
	ModeSync  Mode = "sync"
	ModeAsync Mode = "async"
)

// Annotations are behavioural hints about a tool. They are projected to MCP
// annotation hints and read by the platform's own checks.
type Annotations struct {
	Destructive      bool `json:"destructive,omitempty"`
	Idempotent       bool `json:"idempotent,omitempty"`
	RequiresApproval bool `json:"requires_approval,omitempty"`
	LongRunning      bool `json:"long_running,omitempty"`
	OpenWorld        bool `json:"open_world,omitempty"`
	// FailOpen lets a read tool be decided from the last known good rules
	// and grants, for a short while, when the store cannot be read; every
	// such decision is marked in the audit trail. A write or send tool is
	// always decided fail closed, whatever this says.
	FailOpen bool `json:"fail_open,omitempty"`
}

// Binding says what executes a tool: a handler registered under a key in the
// deployment's trusted registry, a tool on a remote (MCP) connection, or a
// request the platform makes itself (an HTTP request, a SQL statement)
// through the connection the definition names. Exactly one is set. It
// never carries code, and it is never one string to parse. The part a
// platform runtime runs (HTTP, SQL) is what that runtime's contract
// (handler.Runtime) finds, checks and binds.
type Binding struct {
	Handler *HandlerBinding `json:"handler,omitempty"`
	Remote  *RemoteBinding  `json:"remote,omitempty"`
	HTTP    *HTTPBinding    `json:"http,omitempty"`
	SQL     *SQLBinding     `json:"sql,omitempty"`
}

// The kinds of binding, as Binding.Kind names them. A platform runtime's
// kind (handler.Runtime.Kind) is the name of the part it runs.
const (
	BindingHandler = "handler"
	BindingRemote  = "remote"
	BindingHTTP    = "http"
	BindingSQL     = "sql"
)

// Kind names the part of b that is set, "" when none is: what executes
// the tool, for the code that treats every tool of one kind alike (a
// runtime's own checks and binding go through its handler.Runtime).
func (b *Binding) Kind() string {
	switch {
	case b.Handler != nil:
		return BindingHandler
	case b.Remote != nil:
		return BindingRemote
	case b.HTTP != nil:
		return BindingHTTP
	case b.SQL != nil:
		return BindingSQL
	}
	return ""
}

// Platform reports whether one of the platform's own runtimes runs the
// tool (an HTTP request, a SQL statement): its calls go out through the
// connection the definition names, released by the broker, and its
// answers are what a downstream system holds.
func (b *Binding) Platform() bool {
	k := b.Kind()
	return k == BindingHTTP || k == BindingSQL
}

// HTTPBinding is a tool answered by one HTTP request to the system behind
// the definition's connection. Argument values reach the request only
// encoded (a path segment, a query value, a header value, the JSON body):
// nothing is ever concatenated into the URL's structure.
type HTTPBinding struct {
	// Method is GET, POST, PUT, PATCH or DELETE.
	Method string `json:"method"`
	// URL is an absolute http(s) URL, or a path (see RelativeURL), whose
	// path may hold {argument} placeholders, each replaced by that
	// argument's value as one percent-encoded path segment.
	URL string `json:"url"`
	// Query maps query parameter names to a value template: "{argument}"
	// (omitted when the argument is absent) or a literal.
	Query map[string]string `json:"query,omitempty"`
	// Headers maps header names to a value template, as Query does. A
	// value holding a control character is refused, never sent.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is what the request carries: "arguments" (the arguments not
	// used in the path, query or headers, as a JSON object: the default
	// for POST, PUT and PATCH), "none" (the default for GET and DELETE),
	// or "{argument}" for one argument's value as the JSON body.
	Body string `json:"body,omitempty"`
	// Output is a JSON pointer into the response body naming the tool's
	// output; "" is the whole body.
	Output string `json:"output,omitempty"`
	// StatusField, when set, adds the response's status code to an object
	// output under that name.
	StatusField string `json:"status_field,omitempty"`
	// IdempotencyHeader names the header the downstream reads an
	// idempotency key from (Idempotency-Key). A write then sends its call's
	// key there, and a lost answer may be retried with the same key
	// instead of becoming an uncertain action.
	IdempotencyHeader string `json:"idempotency_header,omitempty"`
	// MaxResponseBytes caps the response body read (default 1 MiB); a
	// larger body is refused before it is decoded.
	MaxResponseBytes int `json:"max_response_bytes,omitempty"`
}

// RelativeURL reports whether an HTTP binding's URL is a path
// (/orders/{id}), sent under the base URL of the connection a call goes
// through, rather than an absolute URL. A URL beginning with // names a
// host and is neither.
func RelativeURL(url string) bool {
	return strings.HasPrefix(url, "/") && !strings.HasPrefix(url, "//")
}

// SQLBinding is a tool answered by one parameterised statement run on the
// database behind the definition's connection. Arguments are bound as
// parameters only; no argument is ever spliced into the statement text.
type SQLBinding struct {
	// Statement is one SQL statement whose parameters are written
	// :argument; each is bound to that argument's value (NULL when it is
	// absent).
	Statement string `json:"statement"`
	// MaxRows caps the rows a read answers (default 100); the result says
	// when it was cut.
	MaxRows int `json:"max_rows,omitempty"`
}

// HandlerBinding names a handler in the trusted registry.
type HandlerBinding struct {
	Key string `json:"key"`
}

// RemoteBinding names a tool published by a remote server.
type RemoteBinding struct {
	ConnectionID string `json:"connection_id"`
	RemoteName   string `json:"remote_name"`
}

// ApprovalPolicy configures a tool's approvals.
type ApprovalPolicy struct {
	// Chain lists approver groups in order: the first group answers; when
	// OnTimeout is escalate and nobody answered in time, the next one is
	// asked in a new approval that names the one it replaces.
	Chain []string `json:"chain,omitempty"`
	// OnTimeout is "deny" (the default) or "escalate".
	OnTimeout string `json:"on_timeout,omitempty"`
	// TTL is how long each approval waits; zero is the platform default.
	TTL Duration `json:"ttl,omitempty"`
}

// The defaults on timeout.
const (
	OnTimeoutDeny     = "deny"
	OnTimeoutEscalate = "escalate"
)

// Replay bounds how often a tool that is safe to repeat may be started.
type Replay struct {
	MaxAttempts int `json:"max_attempts"`
}

// Execution is what a tool's definition says of its traffic. Every field
// is optional; zero takes the platform's default.
type Execution struct {
	// MaxAttempts is the most attempts one call makes inside its timeout,
	// the first included: a retryable failure is tried again only where a
	// retry cannot double an effect (a read whose retry is safe, or a
	// write whose downstream honours the idempotency key sent with it, or
	// whose failures roll back). Default DefaultMaxAttempts where a retry
	// is safe; 1 never retries. See Attempts.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// AttemptTimeout bounds each attempt; zero gives an attempt whatever
	// remains of the call's time. Publishing refuses a tool whose attempts,
	// with their pauses, cannot fit its timeout (see Budget).
	AttemptTimeout Duration `json:"attempt_timeout,omitempty"`
	// Backoff is the ceiling of the pause before the second attempt; each
	// later ceiling doubles it, up to MaxBackoff (defaults DefaultBackoff
	// and DefaultMaxBackoff). The pause itself is drawn at random below its
	// ceiling (full jitter); a downstream's Retry-After replaces it.
	Backoff    Duration `json:"backoff,omitempty"`
	MaxBackoff Duration `json:"max_backoff,omitempty"`
	// MaxInFlight caps how many calls of the tool run at once on one
	// node; a call past it is refused at once with rate_limited.
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// RatePerMinute caps how many calls of the tool are admitted a minute,
	// across the nodes that share a rate-limit store.
	RatePerMinute int `json:"rate_per_minute,omitempty"`
	// Priority says what is shed first when a node is near saturation:
	// low goes first, critical last (a read marked critical keeps serving
	// while normal work is shed). Default: normal.
	Priority Priority `json:"priority,omitempty"`
}

// Priority orders what a saturated node sheds.
type Priority string

// The priorities, from first shed to last.
const (
	PriorityLow      Priority = "low"
	PriorityNormal   Priority = "normal"
	PriorityCritical Priority = "critical"
)

// Duration is a time.Duration whose JSON form is a Go duration string
// ("3s", "1m30s"); a bare number is read as milliseconds.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string or a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: use a form such as \"3s\" or \"1m30s\"", s)
		}
		*d = Duration(v)
		return nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("duration %s: use a string such as \"3s\" or a number of milliseconds", b)
	}
	*d = Duration(time.Duration(ms * float64(time.Millisecond)))
	return nil
}

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Writes reports whether calls to the tool change the world.
func (d *Definition) Writes() bool { return d.Effect.Writes() }

// Untrusted reports whether the tool's answers carry content from outside
// the platform, which the result boundary labels untrusted. A definition
// bound to a remote tool is answered by that tool's server, whatever kind
// it declares; one bound to an HTTP request or a SQL statement answers
// what a downstream system or its data holds.
func (d *Definition) Untrusted() bool {
	b := &d.Binding
	return d.Kind == KindVendor || d.Kind == KindMCP || d.Annotations.OpenWorld || b.Remote != nil || b.Platform()
}
