package postgres

import (
	"strings"
	"testing"
)

// A guarded write and its record are one statement, the record's
// placeholders numbered after the write's; a write that already says
// RETURNING is refused when the statement is built.
func TestGuarded(t *testing.T) {
	t.Parallel()
	got := guarded(`UPDATE t SET a = $1 WHERE id = $2 AND version = $3`, 3, "changes", "id, outcome", 2)
	want := `WITH changed AS (UPDATE t SET a = $1 WHERE id = $2 AND version = $3 RETURNING 1)
	INSERT INTO changes (id, outcome)
	SELECT $4, $5 FROM changed`
	if got != want {
		t.Errorf("guarded =\n%s\nwant\n%s", got, want)
	}
	// An audit event is chained: its insert advances the organization's
	// head from the changed row only, its arguments numbered after the
	// write's.
	audited := guarded(`UPDATE t SET a = $1 WHERE id = $2`, 2, "audit_events", auditColumns, auditArgCount)
	if !strings.HasPrefix(audited, `WITH changed AS (UPDATE t SET a = $1 WHERE id = $2 RETURNING 1), `) || !strings.Contains(audited, "$3") || strings.Contains(audited, "$1,") {
		t.Errorf("guarded audit insert =\n%s", audited)
	}
	for name, build := range map[string]func(){
		"RETURNING":         func() { guarded(`UPDATE t SET a = $1 WHERE id = $2 RETURNING id`, 2, "changes", "id", 1) },
		"audit not chained": func() { guarded(`UPDATE t SET a = $1`, 1, "audit_events", "id", 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: did not panic", name)
				}
			}()
			build()
		}()
	}
}
