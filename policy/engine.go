package policy

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// An organization's rules are written in a rule language (Cedar or Rego)
// and published as a bundle. A bundle is decided in two stages: stage 1 is
// the live grants check (package authz), stage 2 the organization's rules,
// evaluated by an Engine on one Request document. Both stages must allow a
// call; either may deny it, and stage 2 may ask for a person's approval.

// Request is the one document a rule engine decides on, the same for every
// engine, so one table of cases gives the same decisions on each. Its JSON
// form is what Rego rules read as input and what bundle tests are written
// in; the Cedar engine maps it to entities and a context record.
type Request struct {
	// Principal is who calls: the agent, with the key it called with.
	Principal Principal `json:"principal"`
	// User is the person the call acts for (a JWT subject or a trusted
	// on_behalf_of), nil when the agent acts alone.
	User *Person `json:"user,omitempty"`
	// Tool is the tool and version the call resolved to.
	Tool Tool `json:"tool"`
	// Arguments are the validated, coerced arguments.
	Arguments map[string]any `json:"arguments"`
	// Facts are the tool's declared policy facts, resolved before the
	// decision.
	Facts map[string]any `json:"facts"`
	// Context is what is true of the call beside who makes it and what it
	// calls.
	Context Context `json:"context"`
}

// Principal is the calling agent.
type Principal struct {
	// Agent is the agent identity.
	Agent string `json:"agent"`
	// Key is the id of the credential the call was made with.
	Key string `json:"key,omitempty"`
	// Roles are the roles the credential holds.
	Roles []string `json:"roles"`
	// Team is the team the agent belongs to, when known.
	Team string `json:"team,omitempty"`
	// Tenant is the tenant the call acts for, when the deployment serves
	// several.
	Tenant string `json:"tenant,omitempty"`
	// Attributes are the agent's attributes (from its key or its token's
	// claims).
	Attributes map[string]any `json:"attributes"`
}

// Person is the person a call acts for.
type Person struct {
	ID         string         `json:"id"`
	Roles      []string       `json:"roles"`
	Groups     []string       `json:"groups"`
	Manager    string         `json:"manager,omitempty"`
	Attributes map[string]any `json:"attributes"`
}

// Tool is what a rule may read of the tool called.
type Tool struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Effect      string   `json:"effect"`
	Destructive bool     `json:"destructive"`
	ReadOnly    bool     `json:"read_only"`
	Tags        []string `json:"tags"`
	// Classification is the data classification of what the tool touches
	// (public, internal, confidential, restricted).
	Classification string `json:"classification,omitempty"`
	Owner          string `json:"owner,omitempty"`
	// Sensitive lists the JSON pointers of the arguments the input schema
	// marks x-sensitive.
	Sensitive []string `json:"sensitive"`
}

// Context is the rest of what a rule may read.
type Context struct {
	// Time is when the call is decided, in the organization's zone.
	Time time.Time `json:"time"`
	// Hour (0-23) and Weekday (0 is Sunday) are Time's, so a rule needs no
	// time arithmetic for business hours.
	Hour    int `json:"hour"`
	Weekday int `json:"weekday"`
	// RunCostCents is what the call's run tree has spent so far.
	RunCostCents int64 `json:"run_cost_cents"`
	// Source is the door the call came in by (rest, mcp, resume, ...).
	Source string `json:"source"`
}

// Approval says who must approve a call a rule routes to a person. The
// zero value is anyone the tool's own approval policy names.
type Approval struct {
	// Group is the approver group that must answer.
	Group string `json:"group,omitempty"`
	// Approvers is how many distinct people must approve; 0 and 1 are one.
	Approvers int `json:"approvers,omitempty"`
	// Manager asks the requesting user's manager.
	Manager bool `json:"manager,omitempty"`
	// Person is the one person who must answer, resolved by the deciding
	// policy (the requesting user's manager when Manager is set); rules
	// leave it empty.
	Person string `json:"person,omitempty"`
}

// Engine compiles bundles written in one rule language.
type Engine interface {
	// Language names the language: "cedar" or "rego".
	Language() string
	// Compile parses and checks a bundle's files (file name to content).
	// A bundle that does not parse, or that a rule of the language would
	// refuse, answers a *BundleError naming the file and the line.
	Compile(files map[string]string) (Rules, error)
}

// Rules is a compiled bundle: safe for concurrent use, immutable.
type Rules interface {
	// Evaluate decides one request. The Decision's Rule names the rule
	// that decided. An error is a fault (the rules could not decide,
	// including a time or memory budget spent), never a denial. A
	// request past the input bounds (MaxInputValues) is not a fault: it
	// is denied by RuleInputBound.
	Evaluate(ctx context.Context, r *Request) (Decision, error)
	// Test runs the bundle's own tests and answers one result per test.
	Test(ctx context.Context) ([]TestResult, error)
}

// TestResult is the outcome of one of a bundle's tests.
type TestResult struct {
	Name string `json:"name"`
	Pass bool   `json:"pass"`
	// Message says what was expected and what was decided, for a failure.
	Message string `json:"message,omitempty"`
}

// BundleError is a bundle that cannot be published as written.
type BundleError struct {
	File string
	// Line is 1-based; 0 when the error is not at a line.
	Line int
	Msg  string
}

func (e *BundleError) Error() string {
	switch {
	case e.File == "":
		return "bundle: " + e.Msg
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return e.File + ": " + e.Msg
}

// ErrBudget is the fault of an evaluation that ran past its time budget,
// or allocated past its memory bound: the rules did not decide, and the
// call is stopped, never allowed.
var ErrBudget = errors.New("policy: evaluation exceeded its budget")
