package toolplane

import (
	"path"
	"strings"
	"time"
)

// CredentialKind says whom a credential authenticates.
type CredentialKind string

// The credential kinds.
const (
	// CredentialAgent authenticates an agent identity: the calls it makes
	// are limited to what the identity is granted and the credential
	// admits.
	CredentialAgent CredentialKind = "agent"
	// CredentialPerson authenticates a person: what they may do (own
	// tools, approve calls, run the platform) follows from the credential's
	// roles.
	CredentialPerson CredentialKind = "person"
)

// Credential is an API key's stored form: never the key itself. A key reads
// "<ID>_<secret>" (package apikey owns the format): the ID is public and
// finds the row, the secret is known only to whoever holds the key, and the
// row keeps only a salted, slow hash of it. A leaked table therefore grants
// nothing.
//
// A credential is valid while it is neither revoked nor expired; the store
// keeps the times and the gateway decides.
type Credential struct {
	// ID is the credential's public id, which is also the key's prefix
	// ("tpk_…"). IDs are unique across every organization: a key is
	// presented before its organization is known, and the ID alone must
	// find it.
	ID             string
	OrganizationID string
	Kind           CredentialKind
	// Subject is who the credential authenticates: the agent identity or
	// the person.
	Subject string
	// Roles are a person's roles (tool_owner, approver, platform_admin,
	// ...). An agent's credential holds at most RoleActForUsers.
	Roles []string
	// Tools narrow an agent's credential to the tool names, or glob
	// patterns over them, listed: the caller's rights, which a call needs
	// beside the agent identity's grants. None leaves the key every tool
	// the identity is granted. A person's credential has none.
	Tools []string
	// ActsFor, on an agent's credential, is the person every call made
	// with it acts for: a token the person's identity provider issued to
	// the agent on the person's behalf (its subject the person, its actor
	// the agent). User is what the token's claims say of that person.
	// Neither is stored: an API key names its person per call
	// (on_behalf_of), when it may.
	ActsFor string `json:"-"`
	User    *User  `json:"-"`
	// ClientID, on an agent's credential, is the OAuth client the access
	// token was issued to by this server's own authorization server (empty
	// for an API key, a client certificate or another issuer's token). Its
	// Tools are then the narrowing the person consented to, so a tool
	// outside them is a scope the client may ask for again (step-up), not
	// a refusal to retry.
	ClientID string `json:"-"`
	// Attributes are what the organization's rules read of the caller
	// (principal.attributes; "team" is its team): an API key's, set when
	// it was minted, or its own token's claims as the deployment maps
	// them. A token issued for a person gives the agent none: its claims
	// are the person's (User).
	Attributes map[string]any `json:"-"`
	// Hash is the salted hash of the key's secret part, with its
	// parameters (see apikey.Hash).
	Hash  []byte
	Label string
	// CreatedAt is when the credential was minted. ExpiresAt, RevokedAt
	// and LastUsedAt are zero for none: no expiry, not revoked, never used.
	CreatedAt  time.Time
	ExpiresAt  time.Time
	RevokedAt  time.Time
	LastUsedAt time.Time
	// CreatedBy is who minted the credential.
	CreatedBy string
	// Listing, on an agent's credential, is how the MCP endpoint lists the
	// tools the key may call (ListingFull when empty), and ListingTop the
	// number of most-used tools a hybrid listing shows (DefaultListingTop
	// when zero). What a key may call is the same in every mode: only what
	// a model reads up front changes.
	Listing    ToolListing
	ListingTop int
	// Version increments on every update; updates are conditional on it.
	// TouchCredential leaves it alone.
	Version int64
}

// ToolListing says how the MCP endpoint lists the tools a key may call.
type ToolListing string

// The tool listings.
const (
	// ListingFull lists every tool the key may call: the default.
	ListingFull ToolListing = "full"
	// ListingMeta lists only the meta-tools (find, describe and call a
	// tool): an agent granted many tools reads three declarations up
	// front, and searches the rest.
	ListingMeta ToolListing = "meta"
	// ListingHybrid lists the tools the key's agent used most (ListingTop
	// of them) beside the meta-tools.
	ListingHybrid ToolListing = "hybrid"
)

// The bounds of a hybrid listing's most-used tools.
const (
	DefaultListingTop = 10
	MaxListingTop     = 50
)

// Valid reports whether l is a listing ("" is the default, full).
func (l ToolListing) Valid() bool {
	switch l {
	case "", ListingFull, ListingMeta, ListingHybrid:
		return true
	}
	return false
}

// ToolListing answers how the MCP endpoint lists the credential's tools,
// and how many most-used tools a hybrid listing shows (0 unless hybrid).
func (c *Credential) ToolListing() (ToolListing, int) {
	switch c.Listing {
	case ListingMeta:
		return ListingMeta, 0
	case ListingHybrid:
		n := c.ListingTop
		if n <= 0 {
			n = DefaultListingTop
		}
		return ListingHybrid, min(n, MaxListingTop)
	}
	return ListingFull, 0
}

// Grants reports whether one of the credential's Tools names tool or is a
// glob pattern (path.Match syntax) that matches it. Where no grant service
// runs (an embedding without one), this is all an agent's key may call.
func (c *Credential) Grants(tool string) bool {
	for _, p := range c.Tools {
		if ok, _ := path.Match(p, tool); ok {
			return true
		}
	}
	return false
}

// Admits reports whether the credential's own rights admit tool: a key
// that lists no Tools admits every tool, one that does only those they
// match. A call is allowed when the agent identity's grants allow the tool
// and the key admits it, so a key handed to one deployment of an agent can
// be narrowed below what the identity holds, never widened beyond it.
func (c *Credential) Admits(tool string) bool {
	return len(c.Tools) == 0 || c.Grants(tool)
}

// The control-plane roles a person's credential may hold. tool_owner and
// tool_publisher are held for a team, written "tool_owner:payments"; the
// others are held for the whole organization. platform_admin holds every
// role.
const (
	RoleToolOwner     = "tool_owner"
	RoleToolPublisher = "tool_publisher"
	RoleAgentOperator = "agent_operator"
	RoleApprover      = "approver"
	RoleAuditor       = "auditor"
	RolePlatformAdmin = "platform_admin"
)

// HasRole reports whether the credential holds role; a role held for a
// team is held only for the team named (team is ignored for the others).
// Only a person holds roles.
func (c *Credential) HasRole(role, team string) bool {
	if c == nil || c.Kind != CredentialPerson {
		return false
	}
	byTeam := role == RoleToolOwner || role == RoleToolPublisher
	for _, have := range c.Roles {
		switch {
		case have == RolePlatformAdmin:
			return true
		case byTeam:
			if team != "" && have == role+":"+team {
				return true
			}
		case have == role:
			return true
		}
	}
	return false
}

// HasAnyRole reports whether the credential holds one of the
// organization-wide roles named (approver, auditor, platform_admin, ...);
// platform_admin holds every role. Only a person holds roles.
func (c *Credential) HasAnyRole(roles ...string) bool {
	for _, role := range roles {
		if c.HasRole(role, "") {
			return true
		}
	}
	return false
}

// GroupRolePrefix begins the role that makes a person a member of an
// approver group: "group:finance" is a member of the group finance, which
// an approval chain names to route an approval to its members.
const GroupRolePrefix = "group:"

// InGroup reports whether the credential is a member of the approver group
// named, holding the role GroupRolePrefix+group; platform_admin is a
// member of every group. Only a person is a member of one.
func (c *Credential) InGroup(group string) bool {
	return group != "" && c.HasRole(GroupRolePrefix+group, "")
}

// HasRoleInAnyTeam reports whether the credential holds one of the team
// roles (tool_owner, tool_publisher) for some team, or platform_admin: a
// caller who may act on some team's tools, before the team is known.
// Only a person holds roles.
func (c *Credential) HasRoleInAnyTeam(roles ...string) bool {
	if c == nil || c.Kind != CredentialPerson {
		return false
	}
	for _, have := range c.Roles {
		if have == RolePlatformAdmin {
			return true
		}
		for _, role := range roles {
			if strings.HasPrefix(have, role+":") {
				return true
			}
		}
	}
	return false
}

// RoleActForUsers is the one role an agent's credential may hold: it lets
// the agent name the person a call acts for (on_behalf_of), as an agent
// deployed in front of signed-in users does. The person named is recorded
// with the call and may not approve it, so naming one is a statement with
// consequences; an agent without this role may not make it.
const RoleActForUsers = "act_for_users"

// ActsForUsers reports whether the credential may name the person a call
// acts for: an agent's credential holding RoleActForUsers.
func (c *Credential) ActsForUsers() bool {
	if c == nil || c.Kind != CredentialAgent {
		return false
	}
	for _, have := range c.Roles {
		if have == RoleActForUsers {
			return true
		}
	}
	return false
}
