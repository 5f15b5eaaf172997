package ceiling

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// ErrNotAuthorized refines toolplane.ErrForbidden: the credential may not
// read or change the organization's vendor ceilings.
var ErrNotAuthorized = toolplane.Refine(toolplane.ErrForbidden, "not authorized for vendor ceilings")

// Store is what the service keeps ceilings in.
type Store interface {
	toolplane.VendorCeilingStore
}

// Service reads and changes an organization's vendor ceilings, each
// checked before it is stored. A platform administrator changes them; a
// platform administrator or an auditor reads them, as connections.
type Service struct {
	store Store
	now   func() time.Time
}

// New answers a service over store; now is its clock, time.Now when nil.
func New(store Store, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, now: now}
}

// Input is a ceiling as an administrator sets it.
type Input struct {
	AccountLimit int64            `json:"account_limit"`
	Lanes        []toolplane.Lane `json:"lanes"`
	Note         string           `json:"note,omitempty"`
	// Version, when not 0, is the version the change is made from: a
	// ceiling stored at any other version (or none) refuses it, so two
	// administrators editing at once do not lose one another's change. 0
	// creates the ceiling or replaces the one stored.
	Version int64 `json:"version,omitempty"`
}

// View is a ceiling with its arithmetic, as it is shown.
type View struct {
	toolplane.VendorCeiling
	Arithmetic Arithmetic `json:"arithmetic"`
}

func view(c *toolplane.VendorCeiling) (*View, error) {
	a, err := Compute(c)
	if err != nil {
		// A stored ceiling was checked when it was stored; one that no
		// longer passes is the store's fault, not the caller's.
		return nil, fmt.Errorf("vendor ceiling %s as stored: %v", c.Provider, err)
	}
	return &View{VendorCeiling: *c, Arithmetic: a}, nil
}

// mayRead and mayWrite are the service's rule on who reads and who
// changes ceilings: configuration of the organization's vendor accounts,
// an administrator's as its connections are.
func mayRead(by *toolplane.Credential) error {
	if !by.HasAnyRole(toolplane.RolePlatformAdmin, toolplane.RoleAuditor) {
		return toolplane.Refuse(by, ErrNotAuthorized, "reading vendor ceilings needs the platform_admin or auditor role")
	}
	return nil
}

func mayWrite(by *toolplane.Credential) error {
	if !by.HasAnyRole(toolplane.RolePlatformAdmin) {
		return toolplane.Refuse(by, ErrNotAuthorized, "changing a vendor ceiling needs the platform_admin role")
	}
	return nil
}

// Set creates or replaces the credential's organization's ceiling of
// provider. The ceiling is checked first (Check): one out of form, or
// whose lanes can make more calls at once than the account accepts, is
// refused naming every lane's product and the sum, and nothing is stored.
// The change is recorded in the change log with the arithmetic.
func (s *Service) Set(ctx context.Context, by *toolplane.Credential, provider string, in Input) (*View, error) {
	if err := mayWrite(by); err != nil {
		return nil, err
	}
	if in.Version < 0 {
		return nil, &InvalidError{"version", "want the version the change is made from, or none"}
	}
	c := &toolplane.VendorCeiling{
		OrganizationID: by.OrganizationID, Provider: provider, AccountLimit: in.AccountLimit,
		Lanes: in.Lanes, Note: in.Note, UpdatedBy: by.Subject, UpdatedAt: s.now(),
	}
	a, err := Check(c)
	if err != nil {
		return nil, err
	}
	stored, err := s.store.GetVendorCeiling(ctx, c.OrganizationID, provider)
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		if in.Version != 0 {
			return nil, fmt.Errorf("vendor ceiling %s: %w: there is none to change from version %d", provider, toolplane.ErrConflict, in.Version)
		}
		c.Version = 1
		if err := s.store.InsertVendorCeiling(ctx, c, s.change(c, "vendor_ceiling.set", a)); err != nil {
			if errors.Is(err, toolplane.ErrExists) {
				return nil, fmt.Errorf("vendor ceiling %s: %w: it was set meanwhile; show it and try again", provider, toolplane.ErrConflict)
			}
			return nil, fmt.Errorf("store vendor ceiling %s: %w", provider, err)
		}
	case err != nil:
		return nil, fmt.Errorf("read vendor ceiling %s: %w", provider, err)
	default:
		if in.Version != 0 && in.Version != stored.Version {
			return nil, fmt.Errorf("vendor ceiling %s: %w: it is at version %d, not %d; show it and try again", provider, toolplane.ErrConflict, stored.Version, in.Version)
		}
		c.Version = stored.Version
		ok, err := s.store.UpdateVendorCeiling(ctx, c, s.change(c, "vendor_ceiling.set", a))
		if err != nil {
			return nil, fmt.Errorf("store vendor ceiling %s: %w", provider, err)
		}
		if !ok {
			return nil, fmt.Errorf("vendor ceiling %s: %w: it changed meanwhile; show it and try again", provider, toolplane.ErrConflict)
		}
	}
	return &View{VendorCeiling: *c, Arithmetic: a}, nil
}

// Get answers the credential's organization's ceiling of provider with
// its arithmetic, or an error wrapping toolplane.ErrNotFound.
func (s *Service) Get(ctx context.Context, by *toolplane.Credential, provider string) (*View, error) {
	if err := mayRead(by); err != nil {
		return nil, err
	}
	if err := checkProvider(provider); err != nil {
		return nil, err
	}
	c, err := s.store.GetVendorCeiling(ctx, by.OrganizationID, provider)
	if err != nil {
		return nil, fmt.Errorf("vendor ceiling %s: %w", provider, err)
	}
	return view(c)
}

// List answers the credential's organization's ceilings by provider,
// each with its arithmetic.
func (s *Service) List(ctx context.Context, by *toolplane.Credential) ([]View, error) {
	if err := mayRead(by); err != nil {
		return nil, err
	}
	cs, err := s.store.ListVendorCeilings(ctx, by.OrganizationID)
	if err != nil {
		return nil, fmt.Errorf("list vendor ceilings: %w", err)
	}
	out := make([]View, 0, len(cs))
	for i := range cs {
		v, err := view(&cs[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, nil
}

// Delete removes the credential's organization's ceiling of provider,
// from version when it is not 0, and records it in the change log.
func (s *Service) Delete(ctx context.Context, by *toolplane.Credential, provider string, version int64) error {
	if err := mayWrite(by); err != nil {
		return err
	}
	if err := checkProvider(provider); err != nil {
		return err
	}
	stored, err := s.store.GetVendorCeiling(ctx, by.OrganizationID, provider)
	if err != nil {
		return fmt.Errorf("vendor ceiling %s: %w", provider, err)
	}
	if version != 0 && version != stored.Version {
		return fmt.Errorf("vendor ceiling %s: %w: it is at version %d, not %d", provider, toolplane.ErrConflict, stored.Version, version)
	}
	ch := s.change(&toolplane.VendorCeiling{OrganizationID: by.OrganizationID, Provider: provider, UpdatedBy: by.Subject}, "vendor_ceiling.delete", Arithmetic{})
	ok, err := s.store.DeleteVendorCeiling(ctx, by.OrganizationID, provider, stored.Version, ch)
	if err != nil {
		return fmt.Errorf("delete vendor ceiling %s: %w", provider, err)
	}
	if !ok {
		return fmt.Errorf("vendor ceiling %s: %w: it changed meanwhile; show it and try again", provider, toolplane.ErrConflict)
	}
	return nil
}

// change answers the change log's record of a ceiling set (with its
// arithmetic, so the log shows what was checked) or deleted.
func (s *Service) change(c *toolplane.VendorCeiling, kind string, a Arithmetic) *toolplane.Change {
	d := map[string]any{"provider": c.Provider}
	if kind != "vendor_ceiling.delete" {
		d["account_limit"], d["lanes"], d["sum"], d["arithmetic"] = c.AccountLimit, a.Lanes, a.Sum, a.String()
	}
	// Unescaped, so the log reads "<=" and ">" as the refusal does.
	var detail bytes.Buffer
	enc := json.NewEncoder(&detail)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(d)
	return &toolplane.Change{
		ID: toolplane.NewID("chg_"), OrganizationID: c.OrganizationID, Kind: kind,
		Subject: "vendor:" + c.Provider, Actor: c.UpdatedBy, Detail: bytes.TrimSpace(detail.Bytes()), CreatedAt: s.now(),
	}
}
