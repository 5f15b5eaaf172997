package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// The canned compliance reports (seed 003's audit queries): each is a
// filter of the trail the server writes, never the caller, so a report
// means the same thing to every auditor who runs it.
const (
	// ReportDestructiveWithoutApproval: every call of a destructive tool
	// that ran (RanOutcomes) naming no approval.
	ReportDestructiveWithoutApproval = "destructive-without-approval"
	// ReportClassification: every call that touched a field of one data
	// class (ReportParams.Class).
	ReportClassification = "classification"
	// ReportApprovalsBy: every approval one person decided
	// (ReportParams.Person), and every call such an approval let through.
	ReportApprovalsBy = "approvals-by"
)

// Reports are the canned reports' names, in the order they are listed.
var Reports = []string{ReportDestructiveWithoutApproval, ReportClassification, ReportApprovalsBy}

// ErrNoSuchReport: the report asked for is none of Reports.
var ErrNoSuchReport = toolplane.Refine(toolplane.ErrNotFound, "no such audit report")

// RanOutcomes are the outcomes of a call whose handler ran, or may have:
// it answered (ok), its outcome is unknown (uncertain, timeout), its
// answer was refused after the effect (invalid_output), the downstream
// failed it (retryable_upstream), or a person settled it (reconciled). A
// refusal before the handler (denied, approval_required, invalid_input,
// unavailable from an open breaker) changed nothing downstream.
var RanOutcomes = []string{"ok", string(toolplane.CodeUncertain), string(toolplane.CodeTimeout),
	string(toolplane.CodeInvalidOutput), string(toolplane.CodeRetryableUpstream), "reconciled"}

// ReportParams are what a report is run with: its subject (when it takes
// one) and the time range, at or after Since and before Until (a zero
// time does not bound).
type ReportParams struct {
	// Class is the data class of ReportClassification ("pii").
	Class string
	// Person is the approver of ReportApprovalsBy.
	Person       string
	Since, Until time.Time
}

// ReportFilter answers the filter of the named report run with p, or an
// error wrapping ErrNoSuchReport, or toolplane.ErrInvalid when the report
// needs a subject p lacks.
func ReportFilter(name string, p ReportParams) (toolplane.AuditFilter, error) {
	f := toolplane.AuditFilter{Since: p.Since, Until: p.Until}
	yes, no := true, false
	switch name {
	case ReportDestructiveWithoutApproval:
		f.Destructive, f.Approved = &yes, &no
		f.Kinds = []toolplane.AuditKind{toolplane.AuditCall, toolplane.AuditReconciliation}
		f.Outcomes = RanOutcomes
	case ReportClassification:
		if p.Class == "" {
			return f, fmt.Errorf("%w: the classification report needs a class (class=pii)", toolplane.ErrInvalid)
		}
		f.Classification = p.Class
	case ReportApprovalsBy:
		if p.Person == "" {
			return f, fmt.Errorf("%w: the approvals-by report needs a person (person=ID)", toolplane.ErrInvalid)
		}
		// An approval's own event and every call it let through carry
		// the person who decided it.
		f.ApproverID = p.Person
	default:
		return f, fmt.Errorf("%w: %q (the reports are %v)", ErrNoSuchReport, name, Reports)
	}
	return f, nil
}

// Report answers a page of the named report over the caller's
// organization, newest first, after the cursor, to an auditor (MayRead).
func (t *Trail) Report(ctx context.Context, name string, p ReportParams, after string, limit int, by *toolplane.Credential) ([]toolplane.AuditEvent, string, error) {
	if err := MayRead(by); err != nil {
		return nil, "", err
	}
	f, err := ReportFilter(name, p)
	if err != nil {
		return nil, "", err
	}
	if err := checkFilter(f); err != nil {
		return nil, "", err
	}
	evs, next, err := t.store.ListAudit(ctx, by.OrganizationID, f, after, limit)
	if err != nil {
		return nil, "", fmt.Errorf("audit report %s: %w", name, err)
	}
	return evs, next, nil
}

// exportPage is how many events a data-subject export reads at once: its
// memory is one page, however many events the person has.
const exportPage = 500

// ErrStop, answered by an export's emit, ends the export early without
// an error.
var ErrStop = errors.New("stop the export")

// ExportSubject hands emit every event of the caller's organization about
// person (the person a call acted for, who decided its approval, or who
// made it), newest first, within [since, until), to an auditor (MayRead).
// It reads the trail a page at a time, so an export of any size holds one
// page. The events are as stored: their arguments were redacted before
// they were (x-sensitive values and credentials replaced), and no event
// holds a secret. An error from emit ends the export and is answered
// (ErrStop ends it with nil).
func (t *Trail) ExportSubject(ctx context.Context, person string, since, until time.Time, by *toolplane.Credential, emit func(*toolplane.AuditEvent) error) error {
	if err := MayRead(by); err != nil {
		return err
	}
	if person == "" {
		return fmt.Errorf("%w: a data-subject export needs a person", toolplane.ErrInvalid)
	}
	f := toolplane.AuditFilter{Person: person, Since: since, Until: until}
	if err := checkFilter(f); err != nil {
		return err
	}
	after := ""
	for {
		evs, next, err := t.store.ListAudit(ctx, by.OrganizationID, f, after, exportPage)
		if err != nil {
			return fmt.Errorf("export the events about %s: %w", person, err)
		}
		for i := range evs {
			if err := emit(&evs[i]); err != nil {
				if errors.Is(err, ErrStop) {
					return nil
				}
				return err
			}
		}
		if next == "" {
			return nil
		}
		after = next
	}
}
