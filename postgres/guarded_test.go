package postgres

import "testing"

// A guarded write and its record are one statement, the record's
// placeholders numbered after the write's; a write that already says
// RETURNING is refused when the statement is built.
func TestGuarded(t *testing.T) {
	t.Parallel()
	got := guarded(`UPDATE t SET a = $1 WHERE id = $2 AND version = $3`, 3, "audit_events", "id, outcome", 2)
	want := `WITH changed AS (UPDATE t SET a = $1 WHERE id = $2 AND version = $3 RETURNING 1)
	INSERT INTO audit_events (id, outcome)
	SELECT $4, $5 FROM changed`
	if got != want {
		t.Errorf("guarded =\n%s\nwant\n%s", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("a write saying RETURNING did not panic")
		}
	}()
	guarded(`UPDATE t SET a = $1 WHERE id = $2 RETURNING id`, 2, "audit_events", "id", 1)
}
