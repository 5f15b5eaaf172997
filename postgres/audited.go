package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolplane/toolplane"
)

// audited answers write, a change of at most one row with placeholders
// numbered from 1 to writeArgs, followed by the insert of its change
// record (when recorded; changeArgs' placeholders next) and of its audit
// event chained to its organization's head (auditArgs' placeholders
// last), as one statement, like guarded: the record and the event are
// inserted only when write changed a row, and either failing undoes the
// write. One statement is atomic as a transaction and one round trip.
func audited(write string, writeArgs int, recorded bool) string {
	if !recorded {
		return guarded(write, writeArgs, "audit_events", auditColumns, auditArgCount)
	}
	return `WITH changed AS (` + write + ` RETURNING 1),
	recorded AS (INSERT INTO changes (` + changeColumns + `)
		SELECT ` + dialect.Placeholders(writeArgs+1, changeArgCount) + ` FROM changed RETURNING 1),
	` + chainedAudit("recorded", writeArgs+changeArgCount+1)
}

// execAudited runs query, a statement built by audited, with the write's
// args, then ch's (when not nil) and e's, and answers whether it stored
// the change; e's place in its chain is read back from the statement's
// row when it did. A duplicate row (the write's, the record's or the
// event's) is an error wrapping toolplane.ErrExists that names its table.
func (s *Store) execAudited(ctx context.Context, query string, args []any, ch *toolplane.Change, e *toolplane.AuditEvent) (bool, error) {
	if ch != nil {
		args = append(args, changeArgs(ch)...)
	}
	args = append(args, auditArgs(e)...)
	err := s.pool.QueryRow(ctx, query+` RETURNING seq, prev_hash, hash`, args...).Scan(&e.Seq, &e.PrevHash, &e.Hash)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case isDuplicate(err):
		var pe *pgconn.PgError
		errors.As(err, &pe)
		return false, fmt.Errorf("%s: %w", pe.TableName, toolplane.ErrExists)
	case err != nil:
		return false, err
	}
	return true, nil
}

// appendAuditTx appends e, when not nil, to its organization's audit
// chain within tx, the transaction of the change it records: a change of
// more than audited's one row stores its event so. The head's row stays
// locked until tx ends, as in AppendAudit. An event whose ID is taken is
// an error wrapping toolplane.ErrExists.
func appendAuditTx(ctx context.Context, tx pgx.Tx, e *toolplane.AuditEvent) error {
	if e == nil {
		return nil
	}
	err := tx.QueryRow(ctx, insertAudit+` RETURNING seq, prev_hash, hash`, auditArgs(e)...).Scan(&e.Seq, &e.PrevHash, &e.Hash)
	return auditErr(e, err)
}
