package toolplane

import "fmt"

// Bounds on the identifiers a caller names. Each is far above any value a
// real caller sends and low enough that no identifier can swell the audit
// trail, the journal, a log line or an approval: an identifier past its
// bound is refused before anything is written.
const (
	// MaxNameLen bounds a tool's name, platform or model-facing.
	MaxNameLen = 256
	// MaxRefLen bounds a reference to something the platform or a caller's
	// system names: an approval or key id, an organization, agent, person
	// or tenant, a version range, a schema hash.
	MaxRefLen = 256
	// MaxRunLen bounds what a caller composes: a run id, a step path, an
	// idempotency key.
	MaxRunLen = 1024
)

// TooLongError refuses an identifier longer than its bound. Field names it
// as a caller spells it (run_id, idempotency_key); the identifier itself is
// never quoted.
type TooLongError struct {
	Field string
	Len   int
	Max   int
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("%s is %d bytes long; at most %d are accepted", e.Field, e.Len, e.Max)
}

// CheckLen answers a *TooLongError when value is longer than max bytes.
func CheckLen(field, value string, max int) error {
	if len(value) > max {
		return &TooLongError{Field: field, Len: len(value), Max: max}
	}
	return nil
}

// Check answers a *TooLongError for the first identifier of a call of tool
// under inv that is longer than its bound, or nil. The invoker checks every
// call with it before the call's span or audit event is begun, whichever
// door it came by, so a door need not repeat it; a door may call it first
// to answer in its own terms.
func (inv *Invocation) Check(tool string) error {
	checks := [...]struct {
		field, value string
		max          int
	}{
		{"tool", tool, MaxNameLen},
		{"organization", inv.OrganizationID, MaxRefLen},
		{"on_behalf_of", inv.UserID, MaxRefLen},
		{"run_id", inv.RunID, MaxRunLen},
		{"root_run_id", inv.RootRunID, MaxRunLen},
		{"agent", inv.AgentID, MaxRefLen},
		{"tenant_id", inv.TenantID, MaxRefLen},
		{"step_path", inv.StepPath, MaxRunLen},
		{"principal", inv.Principal.ID, MaxRefLen},
		{"authorized_by", inv.AuthorizedBy, MaxRefLen},
		{"idempotency_key", inv.IdempotencyKey, MaxRunLen},
		{"version range", inv.Principal.Pins[tool], MaxRefLen},
	}
	for _, c := range checks {
		if err := CheckLen(c.field, c.value, c.max); err != nil {
			return err
		}
	}
	for name, hash := range inv.Contracts {
		if err := CheckLen("contracts", name, MaxNameLen); err != nil {
			return err
		}
		if err := CheckLen("contracts", hash, MaxRefLen); err != nil {
			return err
		}
	}
	return nil
}
