package toolplane

import "time"

// ControlEvent answers the audit event of a change by made to what calls
// may do, at at: of kind, outcome a verb ("created", "revoked",
// "granted", "published"), about subject (the key, the grant's holder,
// the bundle's version). The person is its principal, the key they used
// its KeyID; the caller adds what else the change says (a reason, a
// bundle version), never a secret.
func ControlEvent(by *Credential, kind AuditKind, outcome, subject string, at time.Time) *AuditEvent {
	return &AuditEvent{
		ID: NewID("aud_"), OrganizationID: by.OrganizationID, Kind: kind, Subject: subject,
		PrincipalID: by.Subject, KeyID: by.ID, Source: SourceControl, Outcome: outcome, CreatedAt: at,
	}
}
