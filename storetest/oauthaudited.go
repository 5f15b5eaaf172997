package storetest

import (
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// oauthAudited runs auditedCase's checks on one of the authorization
// server's audited writes, prepared on the OAuth store s.
func oauthAudited(prepare func(t *testing.T, s OAuthStore, org string) auditedWrite) func(t *testing.T, s OAuthStore) {
	return func(t *testing.T, s OAuthStore) {
		auditedCase(func(t *testing.T, _ toolplane.Store, org string) auditedWrite { return prepare(t, s, org) })(t, s)
	}
}

// oauthSettingWrite sets a client's agent over the setting stored before:
// an event that cannot be stored leaves the old agent.
func oauthSettingWrite(t *testing.T, s OAuthStore, org string) auditedWrite {
	set := &toolplane.OAuthClientSetting{OrganizationID: org, ClientID: "tpc_a", AgentID: "agent-old", UpdatedBy: "admin", UpdatedAt: at(0)}
	if err := s.PutOAuthClientSetting(t.Context(), set, nil); err != nil {
		t.Fatal(err)
	}
	return auditedWrite{
		write: func(_ *toolplane.Change, e *toolplane.AuditEvent) error {
			next := *set
			next.AgentID, next.UpdatedAt = "agent-new", at(time.Hour)
			return s.PutOAuthClientSetting(t.Context(), &next, e)
		},
		stored: func() bool {
			got, err := s.GetOAuthClientSetting(t.Context(), org, set.ClientID)
			if err != nil {
				t.Fatalf("GetOAuthClientSetting = %v", err)
			}
			return got.AgentID == "agent-new"
		},
	}
}

// oauthRevokeWrite revokes a standing grant; one revoked already, or
// another organization's, is not revoked and stores no event.
func oauthRevokeWrite(t *testing.T, s OAuthStore, org string) auditedWrite {
	ctx, other := t.Context(), newOrg()
	g, done, elsewhere := newOAuthGrant(org, "alice", 0), newOAuthGrant(org, "alice", 0), newOAuthGrant(other, "alice", 0)
	done.RevokedAt, done.RevokedReason = at(0), toolplane.OAuthRevokedByPerson
	for _, x := range []*toolplane.OAuthGrant{g, done, elsewhere} {
		if err := s.InsertOAuthGrant(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	standing := func(org, id string) bool {
		got, err := s.GetOAuthGrant(ctx, org, id)
		if err != nil {
			t.Fatalf("GetOAuthGrant = %v", err)
		}
		return got.RevokedAt.IsZero()
	}
	return auditedWrite{
		write: func(_ *toolplane.Change, e *toolplane.AuditEvent) error {
			ok, err := s.RevokeOAuthGrant(ctx, org, g.ID, toolplane.OAuthRevokedByAdmin, at(time.Hour), e)
			if ok != (err == nil) {
				t.Fatalf("RevokeOAuthGrant = %v, %v; want true with no error, false with one", ok, err)
			}
			return err
		},
		stored: func() bool { return !standing(org, g.ID) },
		miss: func(_ *toolplane.Change, e *toolplane.AuditEvent) error {
			for _, x := range []*toolplane.OAuthGrant{done, elsewhere} {
				ok, err := s.RevokeOAuthGrant(ctx, org, x.ID, toolplane.OAuthRevokedByAdmin, at(time.Hour), e)
				if ok || err != nil {
					return errors.Join(err, errors.New("revoked a grant that was not standing in the organization"))
				}
			}
			if !standing(other, elsewhere.ID) {
				t.Fatal("revoked another organization's grant")
			}
			return nil
		},
	}
}

// oauthConsentWrite stores a consent: a grant with its first code.
func oauthConsentWrite(t *testing.T, s OAuthStore, org string) auditedWrite {
	ctx := t.Context()
	g := newOAuthGrant(org, "alice", 0)
	taken := newOAuthGrant(org, "bob", 0)
	if err := s.InsertOAuthGrant(ctx, taken); err != nil {
		t.Fatal(err)
	}
	code := func(g *toolplane.OAuthGrant) *toolplane.OAuthCode {
		return &toolplane.OAuthCode{Hash: rand.Text(), OrganizationID: org, GrantID: g.ID, ClientID: g.ClientID,
			RedirectURI: "http://127.0.0.1/cb", Challenge: "chal", ExpiresAt: at(time.Minute)}
	}
	return auditedWrite{
		write: func(_ *toolplane.Change, e *toolplane.AuditEvent) error {
			return s.InsertOAuthGrantWithCode(ctx, g, code(g), e)
		},
		stored: func() bool {
			_, err := s.GetOAuthGrant(ctx, org, g.ID)
			if err != nil && !errors.Is(err, toolplane.ErrNotFound) {
				t.Fatalf("GetOAuthGrant = %v", err)
			}
			return err == nil
		},
		taken: func(_ *toolplane.Change, e *toolplane.AuditEvent) error {
			dup := *g
			dup.ID = taken.ID
			return s.InsertOAuthGrantWithCode(ctx, &dup, code(&dup), e)
		},
	}
}

// testOAuthClientRevokeAudited: a client's revocation stores its setting,
// revokes the organization's standing grants to it (no other
// organization's, no other client's) and stores its event, its Reason the
// count, in one transaction; an event that cannot be stored leaves the
// setting and the grants as they were.
func testOAuthClientRevokeAudited(t *testing.T, s OAuthStore) {
	ctx, org, other := t.Context(), newOrg(), newOrg()
	set := &toolplane.OAuthClientSetting{OrganizationID: org, ClientID: "tpc_a", AgentID: "agent-a", UpdatedBy: "admin", UpdatedAt: at(0)}
	if err := s.PutOAuthClientSetting(ctx, set, nil); err != nil {
		t.Fatal(err)
	}
	mine := []*toolplane.OAuthGrant{newOAuthGrant(org, "alice", 0), newOAuthGrant(org, "bob", 0)}
	otherClient, elsewhere := newOAuthGrant(org, "alice", 0), newOAuthGrant(other, "alice", 0)
	otherClient.ClientID = "tpc_b"
	for _, x := range append([]*toolplane.OAuthGrant{otherClient, elsewhere}, mine...) {
		if err := s.InsertOAuthGrant(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	appendAudit(t, s, controlEvent(org, "ev-taken"))
	standing := func(g *toolplane.OAuthGrant) bool {
		got, err := s.GetOAuthGrant(ctx, g.OrganizationID, g.ID)
		if err != nil {
			t.Fatalf("GetOAuthGrant = %v", err)
		}
		return got.RevokedAt.IsZero()
	}
	revoked := func() *toolplane.OAuthClientSetting {
		off := *set
		off.RevokedAt, off.UpdatedAt = at(time.Hour), at(time.Hour)
		return &off
	}

	n, err := s.RevokeOAuthClient(ctx, revoked(), toolplane.OAuthRevokedClientOff, controlEvent(org, "ev-taken"))
	if !errors.Is(err, toolplane.ErrExists) || n != 0 {
		t.Fatalf("RevokeOAuthClient with a taken event ID = %d, %v; want 0, ErrExists", n, err)
	}
	if got, err := s.GetOAuthClientSetting(ctx, org, set.ClientID); err != nil || !got.RevokedAt.IsZero() {
		t.Fatalf("setting after an event not stored: %+v, %v; want it not revoked", got, err)
	}
	for _, g := range mine {
		if !standing(g) {
			t.Fatalf("grant %s revoked with no event stored", g.ID)
		}
	}

	e := controlEvent(org, "ev-1")
	n, err = s.RevokeOAuthClient(ctx, revoked(), toolplane.OAuthRevokedClientOff, e)
	if err != nil || n != len(mine) {
		t.Fatalf("RevokeOAuthClient = %d, %v; want %d", n, err, len(mine))
	}
	if got, err := s.GetOAuthClientSetting(ctx, org, set.ClientID); err != nil || got.RevokedAt.IsZero() {
		t.Fatalf("setting: %+v, %v; want it revoked", got, err)
	}
	for _, g := range mine {
		got, err := s.GetOAuthGrant(ctx, org, g.ID)
		if err != nil || got.RevokedReason != toolplane.OAuthRevokedClientOff || !got.RevokedAt.Equal(stored(at(time.Hour))) {
			t.Fatalf("grant %s: %+v, %v; want revoked at the setting's time", g.ID, got, err)
		}
	}
	if !standing(otherClient) || !standing(elsewhere) {
		t.Fatal("revoked a grant of another client or another organization")
	}
	got, err := s.GetAudit(ctx, org, e.ID)
	if err != nil {
		t.Fatalf("GetAudit = %v", err)
	}
	if got.Reason != "2 consents revoked" || e.Reason != got.Reason {
		t.Fatalf("event reason = %q (given event %q); want %q", got.Reason, e.Reason, "2 consents revoked")
	}
	wantControlChain(t, s, org, "ev-taken", e.ID)
}
