package toolfile

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/toolplane/toolplane"
)

// seedDoc is the toolplatform/v1 form.
type seedDoc struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   seedMetadata `json:"metadata"`
	Spec       seedSpec     `json:"spec"`
	Version    string       `json:"version"`
}

type seedMetadata struct {
	Name       string   `json:"name"`
	Namespace  string   `json:"namespace"`
	OwnerTeam  string   `json:"owner_team"`
	OnCall     string   `json:"on_call"`
	CostCenter string   `json:"cost_center"`
	Tags       []string `json:"tags"`
}

type seedSpec struct {
	Description string           `json:"description"`
	Annotations seedAnnotations  `json:"annotations"`
	Execution   seedExecution    `json:"execution"`
	Credentials []seedCredential `json:"credentials"`
	InputSchema json.RawMessage  `json:"input_schema"`
	Output      json.RawMessage  `json:"output_schema"`
	ErrorSchema json.RawMessage  `json:"error_schema"`
}

type seedAnnotations struct {
	ReadOnly         *bool `json:"read_only"`
	Idempotent       bool  `json:"idempotent"`
	Destructive      bool  `json:"destructive"`
	RequiresApproval bool  `json:"requires_approval"`
	LongRunning      bool  `json:"long_running"`
	OpenWorld        bool  `json:"open_world"`
}

type seedExecution struct {
	Mode           string          `json:"mode"`
	Runtime        string          `json:"runtime"`
	Target         json.RawMessage `json:"target"`
	TimeoutMS      json.Number     `json:"timeout_ms"`
	Retry          *seedRetry      `json:"retry"`
	ResourceLimits json.RawMessage `json:"resource_limits"`
}

type seedRetry struct {
	MaxAttempts int    `json:"max_attempts"`
	Backoff     string `json:"backoff"`
	BaseDelayMS int    `json:"base_delay_ms"`
}

type seedCredential struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Scopes []string `json:"scopes"`
}

// fromSeed maps the toolplatform/v1 form onto a Definition. The mapping is
// documented in docs/tool-definition.md; every field that has no toolplane
// equivalent is reported as a Note rather than dropped silently.
func fromSeed(js []byte) (toolplane.Definition, []Note, error) {
	var s seedDoc
	if err := strict(js, &s); err != nil {
		return toolplane.Definition{}, nil, err
	}
	if s.Kind != "Tool" {
		return toolplane.Definition{}, nil, fmt.Errorf("%w: kind %q: a %s file must say kind: Tool", ErrFormat, s.Kind, SeedAPIVersion)
	}
	var notes []Note
	name := s.Metadata.Namespace + "." + s.Metadata.Name
	d := toolplane.Definition{
		Name:         name,
		Version:      s.Version,
		Description:  s.Spec.Description,
		InputSchema:  s.Spec.InputSchema,
		OutputSchema: s.Spec.Output,
		ErrorSchema:  s.Spec.ErrorSchema,
		Kind:         toolplane.KindInternal,
		// The form binds a tool to a runtime and a target; toolplane binds
		// it to a handler the deployment registers, under the tool's own name.
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}},
		Effect:  toolplane.EffectWrite,
		Annotations: toolplane.Annotations{
			Destructive:      s.Spec.Annotations.Destructive,
			Idempotent:       s.Spec.Annotations.Idempotent,
			RequiresApproval: s.Spec.Annotations.RequiresApproval,
			LongRunning:      s.Spec.Annotations.LongRunning,
			OpenWorld:        s.Spec.Annotations.OpenWorld,
		},
		Tags:       s.Metadata.Tags,
		Owner:      s.Metadata.OwnerTeam,
		OnCall:     s.Metadata.OnCall,
		CostCenter: s.Metadata.CostCenter,
		Mode:       toolplane.Mode(s.Spec.Execution.Mode),
	}
	if ro := s.Spec.Annotations.ReadOnly; ro != nil && *ro {
		d.Effect = toolplane.EffectRead
	}
	if d.Effect.Writes() {
		// The form has no notion of a meaningful repeat: two identical
		// calls in one run are one effect.
		no := false
		d.Repeatable = &no
	}
	if ms := s.Spec.Execution.TimeoutMS; ms != "" {
		n, err := strconv.ParseInt(string(ms), 10, 64)
		if err != nil || n <= 0 {
			return d, notes, fmt.Errorf("%w: spec.execution.timeout_ms %q: want a positive whole number of milliseconds", ErrFormat, ms)
		}
		d.Timeout = toolplane.Duration(time.Duration(n) * time.Millisecond)
	}
	if r := s.Spec.Execution.Retry; r != nil && r.MaxAttempts > 1 {
		read := d.Effect == toolplane.EffectRead
		switch {
		case read:
			// A read's attempts inside its timeout: the execution block,
			// with the form's base delay as the first pause's ceiling.
			d.Retry = toolplane.RetrySafe
			d.Execution = &toolplane.Execution{MaxAttempts: r.MaxAttempts}
			if r.BaseDelayMS > 0 {
				d.Execution.Backoff = toolplane.Duration(time.Duration(r.BaseDelayMS) * time.Millisecond)
			}
		case d.Annotations.Idempotent:
			// A write retries only by replay with the same key passed
			// downstream, which is what idempotent: true promises.
			d.Replay = &toolplane.Replay{MaxAttempts: r.MaxAttempts}
		default:
			notes = append(notes, Note{"spec.execution.retry", "a write that is not idempotent never retries; max_attempts is ignored"})
		}
		switch {
		case read && r.Backoff != "" && r.Backoff != "exponential":
			notes = append(notes, Note{"spec.execution.retry", fmt.Sprintf("backoff %q is not read: pauses are exponential with full jitter", r.Backoff)})
		case !read && (r.Backoff != "" || r.BaseDelayMS != 0):
			notes = append(notes, Note{"spec.execution.retry", "backoff and base_delay_ms are ignored: a write's replay makes no pause"})
		}
	}
	switch len(s.Spec.Credentials) {
	case 0:
	case 1:
		c := s.Spec.Credentials[0]
		d.Connection = c.Name
		if c.Type != "" || len(c.Scopes) > 0 {
			notes = append(notes, Note{"spec.credentials", fmt.Sprintf("the credential's type and scopes belong to connection %q, configured in the deployment", c.Name)})
		}
	default:
		return d, notes, fmt.Errorf("%w: spec.credentials: a tool declares at most one connection, got %d", ErrFormat, len(s.Spec.Credentials))
	}
	notes, err := bindRuntime(&d, s.Spec.Execution, notes)
	if err != nil {
		return d, notes, err
	}
	if len(s.Spec.Execution.ResourceLimits) > 0 {
		notes = append(notes, Note{"spec.execution.resource_limits", "sandbox limits belong to the handler's deployment and are ignored"})
	}
	return d, notes, nil
}

// bindRuntime binds a definition whose execution names a runtime the
// platform runs itself (http, sql) to that runtime, its target read
// strictly as the runtime's binding; any other runtime stays bound to the
// handler registered under the tool's name, with a note.
func bindRuntime(d *toolplane.Definition, ex seedExecution, notes []Note) ([]Note, error) {
	switch ex.Runtime {
	case "http":
		var b toolplane.HTTPBinding
		if err := strictTarget(ex.Target, &b); err != nil {
			return notes, err
		}
		if b.IdempotencyHeader == "" && d.Writes() && d.Annotations.Idempotent {
			// The form's idempotent: true promises that a retry with the
			// same key is one effect, which only holds if the key reaches
			// the downstream.
			b.IdempotencyHeader = "Idempotency-Key"
			notes = append(notes, Note{"spec.execution.target", "idempotent: true on an http write: the call's idempotency key is sent as Idempotency-Key (set target.idempotency_header to name another header)"})
		}
		d.Binding = toolplane.Binding{HTTP: &b}
	case "sql":
		var b toolplane.SQLBinding
		if err := strictTarget(ex.Target, &b); err != nil {
			return notes, err
		}
		d.Binding = toolplane.Binding{SQL: &b}
	default:
		if ex.Runtime != "" || len(ex.Target) > 0 {
			notes = append(notes, Note{"spec.execution.target", fmt.Sprintf("toolplane runs http and sql targets itself, not runtime %q; the tool is bound to the handler registered as %q", ex.Runtime, d.Name)})
		}
	}
	return notes, nil
}

// strictTarget reads an execution target as a runtime binding, refusing
// fields the binding does not have.
func strictTarget(target json.RawMessage, v any) error {
	if len(target) == 0 {
		return fmt.Errorf("%w: spec.execution.target: missing; an http or sql runtime needs its target", ErrFormat)
	}
	if err := strict(target, v); err != nil {
		return fmt.Errorf("spec.execution.target: %w", err)
	}
	return nil
}
