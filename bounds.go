package toolplane

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

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
	// MaxPatternLen bounds a grant or deny pattern and a bundle reference:
	// a name (or a glob over names) with a version range.
	MaxPatternLen = MaxNameLen + 1 + MaxRefLen
	// MaxReasonLen bounds the free text a person writes beside a change:
	// a deny's reason.
	MaxReasonLen = 4096
	// MaxListLen bounds the entries of one list of identifiers: a grant's
	// tenants, a bundle's references.
	MaxListLen = 256
)

// TooLongError refuses an identifier longer than its bound. Field names it
// as a caller spells it (run_id, idempotency_key); the identifier itself is
// never quoted.
type TooLongError struct {
	Field string
	Len   int
	Max   int
	// Entries: Len and Max count a list's entries, not bytes.
	Entries bool
}

func (e *TooLongError) Error() string {
	if e.Entries {
		return fmt.Sprintf("%s has %d entries; at most %d are accepted", e.Field, e.Len, e.Max)
	}
	return fmt.Sprintf("%s is %d bytes long; at most %d are accepted", e.Field, e.Len, e.Max)
}

// Is reports a too-long identifier as ErrInvalid: a door answers it as
// any other invalid request, with Field as the field at fault.
func (e *TooLongError) Is(target error) bool { return target == ErrInvalid }

// CheckLen answers a *TooLongError when value is longer than max bytes.
func CheckLen(field, value string, max int) error {
	if len(value) > max {
		return &TooLongError{Field: field, Len: len(value), Max: max}
	}
	return nil
}

// MaxQuoted bounds a value an error or a problem quotes back, in bytes:
// enough to recognise it, and a refused value of any size answers a short
// message.
const MaxQuoted = 64

// Clip answers s as an error quotes it back: at most MaxQuoted bytes, cut
// between two characters, with an ellipsis when it was longer, and any
// byte that is not UTF-8 dropped.
func Clip(s string) string {
	if len(s) <= MaxQuoted {
		return strings.ToValidUTF8(s, "")
	}
	cut := MaxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "") + "…"
}

// checkList answers a *TooLongError when list has more than MaxListLen
// entries or one longer than max bytes, naming that entry by its index.
func checkList(field string, list []string, max int) error {
	if len(list) > MaxListLen {
		return &TooLongError{Field: field, Len: len(list), Max: MaxListLen, Entries: true}
	}
	for i, v := range list {
		if err := CheckLen(fmt.Sprintf("%s[%d]", field, i), v, max); err != nil {
			return err
		}
	}
	return nil
}

// CheckBounds answers a *TooLongError for the first field of g past its
// bound. The grant service checks every grant with it before anything
// else reads the grant, so no door need repeat it.
func (g *Grant) CheckBounds() error {
	return firstOf(
		CheckLen("agent_id", g.AgentID, MaxRefLen),
		CheckLen("user_id", g.UserID, MaxRefLen),
		CheckLen("group", g.Group, MaxNameLen),
		CheckLen("pattern", g.Pattern, MaxPatternLen),
		CheckLen("bundle", g.Bundle, MaxNameLen),
		checkList("tenant_scope", g.TenantScope, MaxRefLen),
	)
}

// CheckBounds answers a *TooLongError for the first field of d past its
// bound; the grant service checks every deny with it.
func (d *Deny) CheckBounds() error {
	return firstOf(
		CheckLen("agent_id", d.AgentID, MaxRefLen),
		CheckLen("pattern", d.Pattern, MaxPatternLen),
		CheckLen("reason", d.Reason, MaxReasonLen),
	)
}

// CheckBounds answers a *TooLongError for the first field of b past its
// bound; the grant service checks every bundle with it.
func (b *Bundle) CheckBounds() error {
	return firstOf(
		CheckLen("name", b.Name, MaxNameLen),
		checkList("refs", b.Refs, MaxPatternLen),
	)
}

func firstOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
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
