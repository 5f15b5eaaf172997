package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/toolplane/toolplane"
)

// audited runs change, a write of at most one row that reports whether it
// wrote, and when it did appends ch (when not nil) to the change log and e
// to its organization's audit chain, all in one write (see Store.write):
// a change that does not apply stores neither, and a record or an event
// that cannot be stored undoes the change. change runs as the fn of
// Store.write, under its rules. It answers whether the change was stored.
func (s *Store) audited(ctx context.Context, ch *toolplane.Change, e *toolplane.AuditEvent, change func(context.Context, *sql.Tx) (bool, error)) (bool, error) {
	var ok bool
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		if ok, err = change(ctx, tx); err != nil || !ok {
			return err
		}
		if ch != nil {
			_, err := s.txExec(ctx, tx, insertChange, changeArgs(ch)...)
			if isDuplicate(err) {
				return fmt.Errorf("append change %s: %w", ch.ID, toolplane.ErrExists)
			}
			if err != nil {
				return fmt.Errorf("append change %s: %w", ch.ID, err)
			}
		}
		c := s.newChainer(ctx, tx)
		if err := c.append(e, nil); err != nil {
			return auditErr(e, err)
		}
		return c.save()
	})
	return ok && err == nil, err
}

// inserted answers an insert's outcome as audited's change does: a
// duplicate row is toolplane.ErrExists.
func inserted(_ sql.Result, err error) (bool, error) {
	if isDuplicate(err) {
		return false, toolplane.ErrExists
	}
	return err == nil, err
}

// txExec runs query on tx by the store's prepared statement: a statement
// parsed once, not at every write.
func (s *Store) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	st, err := s.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
}

// appendAuditTx appends e, when not nil, to its organization's audit
// chain within tx, the transaction of the change it records: a write
// whose change is more than audited's one row (several rows, or none
// that decides) stores its event so. An event whose ID is taken is an
// error wrapping toolplane.ErrExists.
func (s *Store) appendAuditTx(ctx context.Context, tx *sql.Tx, e *toolplane.AuditEvent) error {
	if e == nil {
		return nil
	}
	c := s.newChainer(ctx, tx)
	if err := c.append(e, nil); err != nil {
		return auditErr(e, err)
	}
	return c.save()
}
