package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
)

var _ toolplane.VendorCeilingStore = (*Store)(nil)

const vendorCeilingColumns = `organization_id, provider, account_limit, lanes, note, updated_by, updated_at, version`

func scanVendorCeiling(r scanner) (toolplane.VendorCeiling, error) {
	var (
		c       toolplane.VendorCeiling
		lanes   []byte
		updated int64
	)
	if err := r.Scan(&c.OrganizationID, &c.Provider, &c.AccountLimit, &lanes, &c.Note, &c.UpdatedBy, &updated, &c.Version); err != nil {
		return c, err
	}
	if err := json.Unmarshal(lanes, &c.Lanes); err != nil {
		return c, fmt.Errorf("vendor ceiling %s lanes: %w", c.Provider, err)
	}
	if len(c.Lanes) == 0 {
		c.Lanes = nil
	}
	c.UpdatedAt = fromMicros(updated)
	return c, nil
}

// lanesJSON answers a ceiling's lanes as their JSONB column takes them:
// an array, empty when there are none.
func lanesJSON(c *toolplane.VendorCeiling) (string, error) {
	lanes := c.Lanes
	if lanes == nil {
		lanes = []toolplane.Lane{}
	}
	b, err := json.Marshal(lanes)
	if err != nil {
		return "", fmt.Errorf("lanes: %w", err)
	}
	return string(b), nil
}

// insertVendorCeilingRecorded, updateVendorCeilingRecorded and
// deleteVendorCeilingRecorded are each a write and the insert of its
// change record as one statement: a write that matched nothing inserts no
// change, and a change that cannot be stored undoes the write.
var (
	insertVendorCeilingRecorded = guarded(`INSERT INTO vendor_ceilings (`+vendorCeilingColumns+`)
		VALUES (`+dialect.Placeholders(1, 8)+`)`, 8, "changes", changeColumns, changeArgCount)
	updateVendorCeilingRecorded = guarded(`UPDATE vendor_ceilings SET account_limit = $1, lanes = $2, note = $3,
		updated_by = $4, updated_at = $5, version = version + 1
		WHERE organization_id = $6 AND provider = $7 AND version = $8`, 8, "changes", changeColumns, changeArgCount)
	deleteVendorCeilingRecorded = guarded(`DELETE FROM vendor_ceilings WHERE organization_id = $1 AND provider = $2 AND version = $3`,
		3, "changes", changeColumns, changeArgCount)
)

// InsertVendorCeiling stores c and appends ch in one statement; a ceiling
// of the organization and provider, or a duplicate change ID, answers an
// error wrapping toolplane.ErrExists and stores neither.
func (s *Store) InsertVendorCeiling(ctx context.Context, c *toolplane.VendorCeiling, ch *toolplane.Change) error {
	lanes, err := lanesJSON(c)
	if err != nil {
		return fmt.Errorf("insert vendor ceiling %s: %w", c.Provider, err)
	}
	_, err = s.pool.Exec(ctx, insertVendorCeilingRecorded, append([]any{
		c.OrganizationID, c.Provider, c.AccountLimit, lanes, c.Note, c.UpdatedBy, micros(c.UpdatedAt), c.Version,
	}, changeArgs(ch)...)...)
	if isDuplicate(err) {
		return fmt.Errorf("insert vendor ceiling %s: %w", c.Provider, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert vendor ceiling %s: %w", c.Provider, err)
	}
	return nil
}

// GetVendorCeiling answers the organization's ceiling of provider, or an
// error wrapping toolplane.ErrNotFound.
func (s *Store) GetVendorCeiling(ctx context.Context, org, provider string) (*toolplane.VendorCeiling, error) {
	if !dialect.Text(org) || !dialect.Text(provider) {
		// No TEXT value holds it, so no ceiling has it.
		return nil, fmt.Errorf("get vendor ceiling %q: %w", provider, toolplane.ErrNotFound)
	}
	c, err := scanVendorCeiling(s.pool.QueryRow(ctx, `SELECT `+vendorCeilingColumns+` FROM vendor_ceilings
		WHERE organization_id = $1 AND provider = $2`, org, provider))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get vendor ceiling %q: %w", provider, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get vendor ceiling %q: %w", provider, err)
	}
	return &c, nil
}

// UpdateVendorCeiling writes c where the stored organization, provider and
// version are c's, and appends ch, in one statement.
func (s *Store) UpdateVendorCeiling(ctx context.Context, c *toolplane.VendorCeiling, ch *toolplane.Change) (bool, error) {
	if !dialect.Text(c.OrganizationID) || !dialect.Text(c.Provider) {
		return false, nil // no stored ceiling has it
	}
	lanes, err := lanesJSON(c)
	if err != nil {
		return false, fmt.Errorf("update vendor ceiling %s: %w", c.Provider, err)
	}
	tag, err := s.pool.Exec(ctx, updateVendorCeilingRecorded, append([]any{
		c.AccountLimit, lanes, c.Note, c.UpdatedBy, micros(c.UpdatedAt), c.OrganizationID, c.Provider, c.Version,
	}, changeArgs(ch)...)...)
	if isDuplicate(err) {
		return false, fmt.Errorf("update vendor ceiling %s: append change %s: %w", c.Provider, ch.ID, toolplane.ErrExists)
	}
	if err != nil {
		return false, fmt.Errorf("update vendor ceiling %s: %w", c.Provider, err)
	}
	ok := tag.RowsAffected() == 1
	if ok {
		c.Version++
	}
	return ok, nil
}

// DeleteVendorCeiling removes the organization's ceiling of provider at
// version and appends ch, in one statement.
func (s *Store) DeleteVendorCeiling(ctx context.Context, org, provider string, version int64, ch *toolplane.Change) (bool, error) {
	if !dialect.Text(org) || !dialect.Text(provider) {
		return false, nil
	}
	tag, err := s.pool.Exec(ctx, deleteVendorCeilingRecorded, append([]any{org, provider, version}, changeArgs(ch)...)...)
	if isDuplicate(err) {
		return false, fmt.Errorf("delete vendor ceiling %s: append change %s: %w", provider, ch.ID, toolplane.ErrExists)
	}
	if err != nil {
		return false, fmt.Errorf("delete vendor ceiling %s: %w", provider, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ListVendorCeilings answers the organization's ceilings by provider.
func (s *Store) ListVendorCeilings(ctx context.Context, org string) ([]toolplane.VendorCeiling, error) {
	if !dialect.Text(org) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+vendorCeilingColumns+` FROM vendor_ceilings
		WHERE organization_id = $1 ORDER BY provider`, org)
	if err != nil {
		return nil, fmt.Errorf("list vendor ceilings: %w", err)
	}
	cs, err := collect(rows, scanVendorCeiling)
	if err != nil {
		return nil, fmt.Errorf("list vendor ceilings: %w", err)
	}
	return cs, nil
}
