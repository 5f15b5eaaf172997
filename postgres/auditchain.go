package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

// maxSeq stands for "no upper bound" in a range of sequence numbers.
const maxSeq = int64(1<<63 - 1)

// AuditChain answers the organization's chained events with from <= Seq
// <= to (to 0: no bound), in Seq order, at most limit.
func (s *Store) AuditChain(ctx context.Context, org string, from, to int64, limit int) ([]toolplane.AuditEvent, error) {
	return s.AppendAuditChain(ctx, nil, org, from, to, limit)
}

// AppendAuditChain appends to dst what AuditChain answers: a verification
// reads its pages into the memory of the pages it walked.
func (s *Store) AppendAuditChain(ctx context.Context, dst []toolplane.AuditEvent, org string, from, to int64, limit int) ([]toolplane.AuditEvent, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("audit chain: %w", err)
	}
	if to <= 0 {
		to = maxSeq
	}
	// Every column, as the other reads do: packed into one value by the
	// server (as SQLite's store does) the rows cost the server more than
	// the driver saves (see BENCHMARKS.md). Each row's raw values are read
	// as they come instead (chainRows).
	rows, err := s.pool.Query(ctx, `SELECT `+auditColumns+` FROM audit_events
		WHERE organization_id = $1 AND seq >= $2 AND seq <= $3 AND seq > 0 ORDER BY seq LIMIT $4`, org, from, to, limit)
	if err != nil {
		return nil, fmt.Errorf("audit chain: %w", err)
	}
	out, err := chainRows(rows, dst, limit)
	if err != nil {
		return nil, fmt.Errorf("audit chain: %w", err)
	}
	return out, nil
}

// chainRows reads AuditChain's rows: each row's raw values read by
// sqlstore.UnpackBinary, its strings in one allocation and its byte
// strings in another, where scanning its 44 columns costs nineteen (a
// chain is read to be verified, hundreds of thousands of rows a second).
// Columns of a type or format it does not expect are scanned as the other
// reads do.
func chainRows(rows pgx.Rows, dst []toolplane.AuditEvent, limit int) ([]toolplane.AuditEvent, error) {
	scanned := func() ([]toolplane.AuditEvent, error) {
		evs, err := collectSized(rows, limit, scanEvent)
		return append(dst, evs...), err
	}
	fds := rows.FieldDescriptions()
	if len(fds) != sqlstore.AuditColumnCount {
		return scanned()
	}
	for i, fd := range fds {
		binary := fd.Format == pgx.BinaryFormatCode
		var ok bool
		switch sqlstore.PackKindOf(i) {
		case sqlstore.PackText:
			// Its bytes: a text's in either format, or a string kept as
			// BYTEA (arguments_hash, key).
			ok = fd.DataTypeOID == pgtype.TextOID || fd.DataTypeOID == pgtype.VarcharOID ||
				(binary && fd.DataTypeOID == pgtype.ByteaOID)
		case sqlstore.PackBytes:
			ok = binary && fd.DataTypeOID == pgtype.ByteaOID
		case sqlstore.PackInt:
			ok = binary && (fd.DataTypeOID == pgtype.Int8OID || fd.DataTypeOID == pgtype.Int4OID)
		case sqlstore.PackBool:
			ok = binary && fd.DataTypeOID == pgtype.BoolOID
		}
		if !ok {
			return scanned()
		}
	}
	defer rows.Close()
	out := slices.Grow(dst, limit)
	for rows.Next() {
		e, err := sqlstore.UnpackBinary(rows.RawValues(), fromMicros)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// AuditHead answers where the organization's chain stands and the lowest
// Seq of its stored chained events (0: none).
func (s *Store) AuditHead(ctx context.Context, org string) (toolplane.AuditHead, int64, error) {
	var h toolplane.AuditHead
	err := s.pool.QueryRow(ctx, `SELECT seq, hash FROM audit_heads WHERE organization_id = $1`, org).Scan(&h.Seq, &h.Hash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return h, 0, fmt.Errorf("audit head: %w", err)
	}
	var first *int64
	if err := s.pool.QueryRow(ctx, `SELECT MIN(seq) FROM audit_events WHERE organization_id = $1 AND seq > 0`, org).Scan(&first); err != nil {
		return h, 0, fmt.Errorf("audit head: %w", err)
	}
	if first == nil {
		return h, 0, nil
	}
	return h, *first, nil
}

const insertCheckpoint = `INSERT INTO audit_checkpoints (organization_id, seq, hash, created_at, key_id, signature)
	VALUES ($1, $2, $3, $4, $5, $6)`

func checkpointArgs(cp *toolplane.AuditCheckpoint) []any {
	return []any{cp.OrganizationID, cp.Seq, nonNil(cp.Hash), micros(cp.CreatedAt), cp.KeyID, nonNil(cp.Signature)}
}

// nonNil answers b, or an empty slice for nil (stored as an empty bytea,
// where nil would be NULL).
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// AppendAuditCheckpoint stores cp, or answers an error wrapping
// toolplane.ErrExists when the organization has one at its Seq.
func (s *Store) AppendAuditCheckpoint(ctx context.Context, cp *toolplane.AuditCheckpoint) error {
	_, err := s.pool.Exec(ctx, insertCheckpoint, checkpointArgs(cp)...)
	if isDuplicate(err) {
		return fmt.Errorf("audit checkpoint %s@%d: %w", cp.OrganizationID, cp.Seq, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("audit checkpoint %s@%d: %w", cp.OrganizationID, cp.Seq, err)
	}
	return nil
}

// AuditCheckpoints answers the organization's checkpoints with from <=
// Seq <= to (to 0: no bound), in Seq order.
func (s *Store) AuditCheckpoints(ctx context.Context, org string, from, to int64) ([]toolplane.AuditCheckpoint, error) {
	if to <= 0 {
		to = maxSeq
	}
	rows, err := s.pool.Query(ctx, `SELECT organization_id, seq, hash, created_at, key_id, signature FROM audit_checkpoints
		WHERE organization_id = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq`, org, from, to)
	if err != nil {
		return nil, fmt.Errorf("audit checkpoints: %w", err)
	}
	out, err := collect(rows, func(r scanner) (toolplane.AuditCheckpoint, error) {
		var (
			cp      toolplane.AuditCheckpoint
			created int64
		)
		err := r.Scan(&cp.OrganizationID, &cp.Seq, &cp.Hash, &created, &cp.KeyID, &cp.Signature)
		cp.CreatedAt = fromMicros(created)
		return cp, err
	})
	if err != nil {
		return nil, fmt.Errorf("audit checkpoints: %w", err)
	}
	return out, nil
}

// AuditOrganizations answers organizations whose chain head is past their
// newest checkpoint, in ID order after the cursor after, at most limit.
// It crosses organizations on purpose: it is the checkpoint job's, never
// reachable from a request.
func (s *Store) AuditOrganizations(ctx context.Context, after string, limit int) ([]string, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("audit organizations: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT h.organization_id FROM audit_heads h
		WHERE h.organization_id > $1 AND h.seq > COALESCE(
			(SELECT MAX(c.seq) FROM audit_checkpoints c WHERE c.organization_id = h.organization_id), 0)
		ORDER BY h.organization_id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("audit organizations: %w", err)
	}
	out, err := collect(rows, func(r scanner) (string, error) {
		var org string
		return org, r.Scan(&org)
	})
	if err != nil {
		return nil, fmt.Errorf("audit organizations: %w", err)
	}
	return out, nil
}

// auditDropLock seeds the advisory lock key a drop takes for its
// organization (hashtextextended of the organization's ID with this seed):
// the bytes of "auditdrp" read as a big-endian integer. Like every
// advisory lock it is database-wide: two organizations, or two schemas,
// whose keys collide wait for each other's drop, which costs a wait,
// never a wrong answer.
const auditDropLock int64 = 0x6175646974647270

var firstChained = sqlstore.Numbered(dialect, sqlstore.FirstChained)

// DropAudit is retention: in one transaction it waits for any other drop
// of the organization to end (an advisory lock: without it two drops of
// one range at once each pass audit_drop's check of the range's end
// before either deletes, the second then deletes nothing, and both
// record the drop), checks that the range still starts at from, and
// calls audit_drop (a SECURITY DEFINER function owned by the tables'
// owner, so the role the node runs as needs no DELETE right on the
// trail), which checks that the chain's hash at cp.Seq is cp.Hash, stores
// cp (unless the same checkpoint is stored already) and deletes the
// organization's events up to it as one whole prefix; then it appends ev,
// the drop's own event.
func (s *Store) DropAudit(ctx context.Context, from int64, cp *toolplane.AuditCheckpoint, ev *toolplane.AuditEvent) (int, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, $2))`, cp.OrganizationID, auditDropLock); err != nil {
			return err
		}
		// A statement of its own, after the lock: read committed takes
		// its snapshot at the statement's start, so it sees every drop
		// that held the lock before.
		var first *int64
		if err := tx.QueryRow(ctx, firstChained, cp.OrganizationID).Scan(&first); err != nil {
			return err
		}
		if err := sqlstore.DroppedMeanwhile(from, first); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT audit_drop($1, $2, $3, $4, $5, $6)`, checkpointArgs(cp)...).Scan(&n)
		var pe *pgconn.PgError
		switch {
		case errors.As(err, &pe) && pe.Code == "TP404":
			return fmt.Errorf("no event at %d: %w", cp.Seq, toolplane.ErrNotFound)
		case errors.As(err, &pe) && pe.Code == "TP409":
			return fmt.Errorf("the chain's hash at %d is not the checkpoint's: %w", cp.Seq, toolplane.ErrConflict)
		case errors.As(err, &pe) && pe.Code == "TP403":
			return fmt.Errorf("the event at %d is younger than the database's retention floor (audit_retention_floor): %w", cp.Seq, toolplane.ErrConflict)
		case err != nil:
			return err
		}
		if ev == nil {
			return nil
		}
		err = tx.QueryRow(ctx, insertAudit+` RETURNING seq, prev_hash, hash`, auditArgs(ev)...).Scan(&ev.Seq, &ev.PrevHash, &ev.Hash)
		return auditErr(ev, err)
	})
	if err != nil {
		return 0, fmt.Errorf("drop audit %s through %d: %w", cp.OrganizationID, cp.Seq, err)
	}
	return int(n), nil
}

// AuditExpired answers the prefix of the organization's stored chain whose
// events were all created before before.
func (s *Store) AuditExpired(ctx context.Context, org string, before time.Time) (int64, int64, error) {
	var first, newer, last *int64
	err := s.pool.QueryRow(ctx, `SELECT
		(SELECT MIN(seq) FROM audit_events WHERE organization_id = $1 AND seq > 0),
		(SELECT MIN(seq) FROM audit_events WHERE organization_id = $1 AND seq > 0 AND created_at >= $2),
		(SELECT MAX(seq) FROM audit_events WHERE organization_id = $1 AND seq > 0)`, org, micros(before)).Scan(&first, &newer, &last)
	if err != nil {
		return 0, 0, fmt.Errorf("audit expired of %s: %w", org, err)
	}
	return expiredRange(first, newer, last)
}

// expiredRange answers the range from first to the event before newer (or
// to last, when no event is newer); none when nothing is stored or the
// first stored event is newer.
func expiredRange(first, newer, last *int64) (int64, int64, error) {
	if first == nil {
		return 0, 0, nil
	}
	through := *last
	if newer != nil {
		through = *newer - 1
	}
	if through < *first {
		return *first, 0, nil
	}
	return *first, through, nil
}

// AuditRetentionOrganizations answers organizations storing a chained
// event created before before, in ID order after the cursor after, at most
// limit. It crosses organizations on purpose: it is the retention job's,
// never reachable from a request.
func (s *Store) AuditRetentionOrganizations(ctx context.Context, before time.Time, after string, limit int) ([]string, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("audit retention organizations: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT h.organization_id FROM audit_heads h
		WHERE h.organization_id > $1 AND EXISTS (SELECT 1 FROM audit_events e
			WHERE e.organization_id = h.organization_id AND e.seq > 0 AND e.created_at < $2)
		ORDER BY h.organization_id LIMIT $3`, after, micros(before), limit)
	if err != nil {
		return nil, fmt.Errorf("audit retention organizations: %w", err)
	}
	out, err := collect(rows, func(r scanner) (string, error) {
		var org string
		return org, r.Scan(&org)
	})
	if err != nil {
		return nil, fmt.Errorf("audit retention organizations: %w", err)
	}
	return out, nil
}

var _ toolplane.AuditChainStore = (*Store)(nil)
