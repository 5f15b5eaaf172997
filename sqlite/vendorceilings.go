package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolplane/toolplane"
)

var _ toolplane.VendorCeilingStore = (*Store)(nil)

const vendorCeilingColumns = `organization_id, provider, account_limit, lanes, note, updated_by, updated_at, version`

func scanVendorCeiling(r scanner) (toolplane.VendorCeiling, error) {
	var (
		c       toolplane.VendorCeiling
		lanes   string
		updated int64
	)
	if err := r.Scan(&c.OrganizationID, &c.Provider, &c.AccountLimit, &lanes, &c.Note, &c.UpdatedBy, &updated, &c.Version); err != nil {
		return c, err
	}
	if err := json.Unmarshal([]byte(lanes), &c.Lanes); err != nil {
		return c, fmt.Errorf("vendor ceiling %s lanes: %w", c.Provider, err)
	}
	if len(c.Lanes) == 0 {
		c.Lanes = nil
	}
	c.UpdatedAt = fromMicros(updated)
	return c, nil
}

// lanesJSON answers a ceiling's lanes as their column keeps them: a JSON
// array, empty when there are none.
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

// InsertVendorCeiling stores c and appends ch in one transaction; a
// ceiling of the organization and provider, or a duplicate change ID,
// answers an error wrapping toolplane.ErrExists and stores neither.
func (s *Store) InsertVendorCeiling(ctx context.Context, c *toolplane.VendorCeiling, ch *toolplane.Change) error {
	lanes, err := lanesJSON(c)
	if err != nil {
		return fmt.Errorf("insert vendor ceiling %s: %w", c.Provider, err)
	}
	err = s.recorded(ctx, ch, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO vendor_ceilings (`+vendorCeilingColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			c.OrganizationID, c.Provider, c.AccountLimit, lanes, c.Note, c.UpdatedBy, micros(c.UpdatedAt), c.Version)
		if isDuplicate(err) {
			return toolplane.ErrExists
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("insert vendor ceiling %s: %w", c.Provider, err)
	}
	return nil
}

// GetVendorCeiling answers the organization's ceiling of provider, or an
// error wrapping toolplane.ErrNotFound.
func (s *Store) GetVendorCeiling(ctx context.Context, org, provider string) (*toolplane.VendorCeiling, error) {
	c, err := scanVendorCeiling(s.queryRow(ctx, `SELECT `+vendorCeilingColumns+` FROM vendor_ceilings
		WHERE organization_id = ? AND provider = ?`, org, provider))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get vendor ceiling %q: %w", provider, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get vendor ceiling %q: %w", provider, err)
	}
	return &c, nil
}

// UpdateVendorCeiling writes c where the stored organization, provider and
// version are c's, and appends ch in the same transaction.
func (s *Store) UpdateVendorCeiling(ctx context.Context, c *toolplane.VendorCeiling, ch *toolplane.Change) (bool, error) {
	lanes, err := lanesJSON(c)
	if err != nil {
		return false, fmt.Errorf("update vendor ceiling %s: %w", c.Provider, err)
	}
	err = s.recorded(ctx, ch, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE vendor_ceilings SET account_limit = ?, lanes = ?, note = ?, updated_by = ?,
			updated_at = ?, version = version + 1
			WHERE organization_id = ? AND provider = ? AND version = ?`,
			c.AccountLimit, lanes, c.Note, c.UpdatedBy, micros(c.UpdatedAt), c.OrganizationID, c.Provider, c.Version)
		return staleUnless(res, err)
	})
	if errors.Is(err, errStale) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("update vendor ceiling %s: %w", c.Provider, err)
	}
	c.Version++
	return true, nil
}

// DeleteVendorCeiling removes the organization's ceiling of provider at
// version and appends ch in the same transaction.
func (s *Store) DeleteVendorCeiling(ctx context.Context, org, provider string, version int64, ch *toolplane.Change) (bool, error) {
	err := s.recorded(ctx, ch, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM vendor_ceilings WHERE organization_id = ? AND provider = ? AND version = ?`,
			org, provider, version)
		return staleUnless(res, err)
	})
	if errors.Is(err, errStale) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete vendor ceiling %s: %w", provider, err)
	}
	return true, nil
}

// staleUnless answers errStale when a write matched no row.
func staleUnless(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	ok, err := affected(res)
	if err != nil {
		return err
	}
	if !ok {
		return errStale
	}
	return nil
}

// ListVendorCeilings answers the organization's ceilings by provider.
func (s *Store) ListVendorCeilings(ctx context.Context, org string) ([]toolplane.VendorCeiling, error) {
	rows, err := s.query(ctx, `SELECT `+vendorCeilingColumns+` FROM vendor_ceilings
		WHERE organization_id = ? ORDER BY provider`, org)
	if err != nil {
		return nil, fmt.Errorf("list vendor ceilings: %w", err)
	}
	cs, err := collect(rows, scanVendorCeiling)
	if err != nil {
		return nil, fmt.Errorf("list vendor ceilings: %w", err)
	}
	return cs, nil
}
