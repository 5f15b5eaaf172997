package authserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// ClientView is a client as an admin of one organization sees it: its
// registration and what the organization decided about it.
type ClientView struct {
	ClientID     string    `json:"client_id"`
	Name         string    `json:"client_name,omitempty"`
	RedirectURIs []string  `json:"redirect_uris"`
	Source       string    `json:"source"`
	CreatedAt    time.Time `json:"created_at"`
	// AgentID is the agent identity its tokens act as in the organization.
	AgentID   string     `json:"agent_id"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// ConsentView is a person's consent to a client.
type ConsentView struct {
	ID            string     `json:"id"`
	ClientID      string     `json:"client_id"`
	Subject       string     `json:"subject"`
	AgentID       string     `json:"agent_id"`
	Scope         string     `json:"scope"`
	Resource      string     `json:"resource"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiresAt     time.Time  `json:"expires_at"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	RevokedReason string     `json:"revoked_reason,omitempty"`
}

func isAdmin(by *toolplane.Credential) bool { return by.HasRole(toolplane.RolePlatformAdmin, "") }

func forbidden(what string) error {
	return fmt.Errorf("%s takes a platform_admin: %w", what, toolplane.ErrForbidden)
}

// Clients answers the registered clients by's organization knows of: one
// of its people consented to it, or its admins set or revoked it. Clients
// register anonymously for the whole server, so the others (and the
// addresses they name) are no organization's to read. By a platform_admin
// only; a client not listed can still be set or revoked by its ID.
func (s *Server) Clients(ctx context.Context, by *toolplane.Credential) ([]ClientView, error) {
	if !isAdmin(by) {
		return nil, forbidden("listing OAuth clients")
	}
	clients, err := s.cfg.Store.OAuthClients(ctx, 1000)
	if err != nil {
		return nil, err
	}
	sets, err := s.cfg.Store.OAuthClientSettings(ctx, by.OrganizationID)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]toolplane.OAuthClientSetting, len(sets))
	for _, st := range sets {
		byID[st.ClientID] = st
	}
	grants, err := s.cfg.Store.OAuthGrants(ctx, by.OrganizationID, "")
	if err != nil {
		return nil, err
	}
	consented := make(map[string]bool, len(grants))
	for _, g := range grants {
		consented[g.ClientID] = true
	}
	out := make([]ClientView, 0, len(clients))
	for _, c := range clients {
		if _, set := byID[c.ID]; !set && !consented[c.ID] {
			continue
		}
		v := ClientView{ClientID: c.ID, Name: c.Name, RedirectURIs: c.RedirectURIs, Source: c.Source, CreatedAt: c.CreatedAt, AgentID: s.cfg.Agent}
		if st, ok := byID[c.ID]; ok {
			if st.AgentID != "" {
				v.AgentID = st.AgentID
			}
			if !st.RevokedAt.IsZero() {
				v.RevokedAt = &st.RevokedAt
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// setting answers the organization's setting of the client, a new one
// when there is none; the client must exist.
func (s *Server) setting(ctx context.Context, org, clientID string) (*toolplane.OAuthClientSetting, error) {
	if _, err := s.cfg.Store.GetOAuthClient(ctx, clientID); err != nil {
		return nil, err
	}
	st, err := s.cfg.Store.GetOAuthClientSetting(ctx, org, clientID)
	if errors.Is(err, toolplane.ErrNotFound) {
		return &toolplane.OAuthClientSetting{OrganizationID: org, ClientID: clientID}, nil
	}
	return st, err
}

// goneSetting answers the organization's setting of a client the server
// holds no row of, a new one when there is none, provided it is a
// metadata document's (stored only at a person's first consent, and
// revoked ahead of it) or one of the organization's consents or settings
// names it; an error wrapping ErrNotFound otherwise.
func (s *Server) goneSetting(ctx context.Context, org, clientID string) (*toolplane.OAuthClientSetting, error) {
	st, err := s.cfg.Store.GetOAuthClientSetting(ctx, org, clientID)
	if !errors.Is(err, toolplane.ErrNotFound) {
		return st, err
	}
	if IsDocumentID(clientID) {
		return &toolplane.OAuthClientSetting{OrganizationID: org, ClientID: clientID}, nil
	}
	grants, err := s.cfg.Store.OAuthGrants(ctx, org, "")
	if err != nil {
		return nil, err
	}
	for _, g := range grants {
		if g.ClientID == clientID {
			return &toolplane.OAuthClientSetting{OrganizationID: org, ClientID: clientID}, nil
		}
	}
	return nil, fmt.Errorf("oauth client %s: %w", clientID, toolplane.ErrNotFound)
}

// RevokeClient revokes the client in by's organization: nobody of it may
// connect it again, and every consent given to it is revoked (its tokens
// refused on their next call). Answers how many consents it revoked. The
// setting and the consents' revocation are one transaction, which a
// consent being stored at the time either precedes (and is revoked by)
// or follows (and is refused). A client whose registration is gone (the
// sweep of unused clients removed it) is revoked all the same when any
// consent of the organization names it, and a metadata document's client
// before anyone consented to it; another the server does not know
// answers an error wrapping ErrNotFound.
func (s *Server) RevokeClient(ctx context.Context, by *toolplane.Credential, clientID string) (int, error) {
	if !isAdmin(by) {
		return 0, forbidden("revoking an OAuth client")
	}
	st, err := s.setting(ctx, by.OrganizationID, clientID)
	if errors.Is(err, toolplane.ErrNotFound) {
		st, err = s.goneSetting(ctx, by.OrganizationID, clientID)
	}
	if err != nil {
		return 0, err
	}
	now := s.cfg.Now()
	if st.RevokedAt.IsZero() {
		st.RevokedAt = now
	}
	st.UpdatedBy, st.UpdatedAt = by.Subject, now
	// The setting, the consents and the event are one transaction: no
	// revocation without its event, and none half made.
	n, err := s.cfg.Store.RevokeOAuthClient(ctx, st, toolplane.OAuthRevokedClientOff, s.event(by, "client_revoked", clientID, ""))
	if err != nil {
		return 0, err
	}
	return n, nil
}

// SetClientAgent sets the agent identity the client's tokens act as in
// by's organization ("" for the deployment's default). Consents given
// before keep the agent they were given for.
func (s *Server) SetClientAgent(ctx context.Context, by *toolplane.Credential, clientID, agent string) error {
	if !isAdmin(by) {
		return forbidden("setting an OAuth client's agent")
	}
	if err := toolplane.CheckLen("agent_id", agent, toolplane.MaxRefLen); err != nil {
		return fmt.Errorf("%w: %v", toolplane.ErrInvalid, err)
	}
	st, err := s.setting(ctx, by.OrganizationID, clientID)
	if err != nil {
		return err
	}
	st.AgentID, st.UpdatedBy, st.UpdatedAt = agent, by.Subject, s.cfg.Now()
	return s.cfg.Store.PutOAuthClientSetting(ctx, st, s.event(by, "client_agent_set", clientID, "agent "+agent))
}

// Consents answers the consents of subject in by's organization: a person
// their own (subject empty or theirs), a platform_admin anyone's (every
// person's when subject is empty).
func (s *Server) Consents(ctx context.Context, by *toolplane.Credential, subject string) ([]ConsentView, error) {
	if by.Kind != toolplane.CredentialPerson {
		return nil, fmt.Errorf("consents are a person's: %w", toolplane.ErrForbidden)
	}
	if !isAdmin(by) {
		if subject != "" && subject != by.Subject {
			return nil, forbidden("another person's consents")
		}
		subject = by.Subject
	}
	gs, err := s.cfg.Store.OAuthGrants(ctx, by.OrganizationID, subject)
	if err != nil {
		return nil, err
	}
	out := make([]ConsentView, 0, len(gs))
	for _, g := range gs {
		v := ConsentView{ID: g.ID, ClientID: g.ClientID, Subject: g.Subject, AgentID: g.AgentID, Scope: scope(g.Tools), Resource: g.Resource,
			CreatedAt: g.CreatedAt, ExpiresAt: g.ExpiresAt, RevokedReason: g.RevokedReason}
		if !g.RevokedAt.IsZero() {
			v.RevokedAt = &g.RevokedAt
		}
		out = append(out, v)
	}
	return out, nil
}

// RevokeConsent revokes a consent: the person's own, or anyone's by a
// platform_admin. Its tokens are refused on their next call, on every
// node. A consent revoked already answers nil.
func (s *Server) RevokeConsent(ctx context.Context, by *toolplane.Credential, id string) error {
	if by.Kind != toolplane.CredentialPerson {
		return fmt.Errorf("consents are a person's: %w", toolplane.ErrForbidden)
	}
	g, err := s.cfg.Store.GetOAuthGrant(ctx, by.OrganizationID, id)
	if err != nil {
		return err
	}
	reason := toolplane.OAuthRevokedByPerson
	if g.Subject != by.Subject {
		if !isAdmin(by) {
			// Another person's consent is not there for them.
			return fmt.Errorf("consent %s: %w", id, toolplane.ErrNotFound)
		}
		reason = toolplane.OAuthRevokedByAdmin
	}
	// The event is stored with the revocation, or neither is; a consent
	// revoked already stores no second one.
	_, err = s.cfg.Store.RevokeOAuthGrant(ctx, by.OrganizationID, id, reason, s.cfg.Now(),
		s.event(by, "revoked", id, reason+"; client "+g.ClientID+" for "+g.Subject))
	return err
}

// isOperator reports whether by is the deployment's operator: a
// platform_admin of the operator's organization (Config.Operator), the
// rule every action on what all organizations share follows (the
// settings of upstream tools are the other).
func (s *Server) isOperator(by *toolplane.Credential) bool {
	return s.cfg.Operator != "" && by.OrganizationID == s.cfg.Operator && isAdmin(by)
}

// RotateSigningKey makes a new access-token signing key; the previous one
// keeps verifying, older ones are retired. The key signs every
// organization's tokens, so it is the operator's: by a platform_admin of
// the operator's organization only; another organization's admin is
// refused with ErrForbidden.
func (s *Server) RotateSigningKey(ctx context.Context, by *toolplane.Credential) (string, error) {
	if !s.isOperator(by) {
		if s.cfg.Operator == "" {
			return "", fmt.Errorf("%w: the OAuth signing key signs every organization's tokens, and this server names no operator's organization to rotate it", toolplane.ErrForbidden)
		}
		return "", fmt.Errorf("%w: the OAuth signing key signs every organization's tokens; it is rotated by a platform_admin of the operator's organization (%s), not by an organization's admin", toolplane.ErrForbidden, s.cfg.Operator)
	}
	id, err := s.keys.rotate(ctx)
	if err != nil {
		return "", err
	}
	s.record(ctx, by, "signing_key_rotated", id, "")
	return id, nil
}
