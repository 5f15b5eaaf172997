package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/internal/backend"
)

// firstStartChange is the ID of the change that records a database's
// first start. The credentials first start mints have random IDs, like any
// key's (a fixed ID would tell everyone which id to present as the admin's);
// what makes one node's keys the first ones, when several nodes start on
// one empty database at once, is this change: each node stores its admin
// key and then appends it, exactly one append succeeds, and every other
// node revokes the key it stored and forgets it. Each key is stored with
// its audit event, and each revocation with its own, so the trail
// accounts for every key that ever authenticated.
const firstStartChange = "chg_first_start"

// firstDemoGrantID is the demo agent's grant of the demo tools.
const firstDemoGrantID = "grt_first_demo"

// firstStarter is whom first start grants as: an agent operator of the
// default organization, recorded as "first start".
var firstStarter = &toolplane.Credential{OrganizationID: DefaultOrganization, Kind: toolplane.CredentialPerson,
	Subject: "first start", Roles: []string{toolplane.RoleAgentOperator}}

// firstStart mints an admin credential (and, with the demo, an agent's) the
// first time the database is served. The keys are written to a file only
// the operator can read before they are stored, so a key never exists that
// nobody holds; the file is created exclusively and never through a
// symbolic link, so a file planted in the data directory cannot capture
// them.
func firstStart(ctx context.Context, b *backend.Backend, database, dataDir string, withDemo bool, stdout io.Writer, log *slog.Logger) error {
	existing, _, err := b.Store.ListCredentials(ctx, DefaultOrganization, "", 1)
	if err != nil {
		return err
	}
	if len(existing) > 0 {
		return nil
	}
	dataDir = dataDirOf(database, dataDir)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	admin, err := mint(toolplane.CredentialPerson, "admin", "TOOLPLANE_ADMIN_KEY", toolplane.RolePlatformAdmin, toolplane.RoleApprover, toolplane.RoleAuditor)
	if err != nil {
		return err
	}
	keys := []minted{admin}
	if withDemo {
		agent, err := mint(toolplane.CredentialAgent, "demo-agent", "TOOLPLANE_DEMO_AGENT_KEY")
		if err != nil {
			return err
		}
		keys = append(keys, agent)
	}
	file, err := writeCredentials(dataDir, keys)
	if err != nil {
		return err
	}
	now := time.Now()
	if err := b.Store.InsertCredentialAudited(ctx, admin.cred, keyEvent("created", admin.cred, now)); err != nil {
		os.Remove(file) // nothing was stored
		return fmt.Errorf("store first credentials: %w", err)
	}
	err = b.Store.AppendChange(ctx, &toolplane.Change{ID: firstStartChange, OrganizationID: DefaultOrganization,
		Kind: "credential.first_start", Subject: admin.cred.ID, Actor: "first start", CreatedAt: now})
	if errors.Is(err, toolplane.ErrExists) {
		// Another node started on this database at the same moment and its
		// keys are the first ones; this node's admin key is withdrawn.
		admin.cred.RevokedAt = now
		if ok, err := b.Store.UpdateCredentialAudited(ctx, admin.cred, keyEvent("revoked", admin.cred, now)); err != nil || !ok {
			return fmt.Errorf("withdraw the admin key %s that lost the first start to another node (it is in %s): %v", admin.cred.ID, file, err)
		}
		os.Remove(file)
		fmt.Fprintln(stdout, "first start: another node created the first credentials; they are in its data directory")
		return nil
	}
	if err != nil {
		return fmt.Errorf("record the first start (the admin key in %s is valid): %w", file, err)
	}
	for _, k := range keys[1:] {
		if err := b.Store.InsertCredentialAudited(ctx, k.cred, keyEvent("created", k.cred, now)); err != nil {
			// The admin key in the file works: keep it.
			return fmt.Errorf("store first credentials (the admin key in %s is valid): %w", file, err)
		}
	}
	if withDemo {
		// The demo agent's key narrows nothing: what it may call is what
		// its identity is granted, so the identity gets the demo
		// catalogue, granted like any grant (and revocable like one).
		// Adding a grant resolves no tool, so this service needs no
		// registry.
		grants := authz.New(authz.Config{Store: b.Store})
		g := &toolplane.Grant{AgentID: "demo-agent", Pattern: "demo.*"}
		if err := grants.AddGrantWithID(ctx, firstDemoGrantID, g, firstStarter); err != nil {
			return fmt.Errorf("grant the demo agent the demo tools (the keys in %s are valid): %w", file, err)
		}
	}
	fmt.Fprintf(stdout, "first start: credentials written to %s (readable by you only); they are not shown again\n", file)
	return nil
}

// keyEvent answers the audit event of first start's change to the key
// cred: in the trail as any key's is, by ID, made by first start.
func keyEvent(outcome string, cred *toolplane.Credential, at time.Time) *toolplane.AuditEvent {
	ev := toolplane.ControlEvent(firstStarter, toolplane.AuditKey, outcome, cred.ID, at)
	ev.Reason = string(cred.Kind) + " " + cred.Subject
	return ev
}

// minted is a key first start made: its credential, and the line of the
// credentials file that holds its secret.
type minted struct {
	cred *toolplane.Credential
	line string
}

// mint makes a key of kind for subject with roles, named label in the
// credentials file.
func mint(kind toolplane.CredentialKind, subject, label string, roles ...string) (minted, error) {
	id, secret, err := apikey.New(kind)
	if err != nil {
		return minted{}, err
	}
	c := &toolplane.Credential{ID: id, OrganizationID: DefaultOrganization, Kind: kind, Subject: subject, Roles: roles,
		Hash: apikey.Hash(secret), Label: label, CreatedAt: time.Now(), CreatedBy: "first start"}
	return minted{c, fmt.Sprintf("%s=%s", label, apikey.Key(id, secret))}, nil
}

// writeCredentials writes the keys' lines to dataDir's credentials.env,
// readable by its owner only, and answers the file. The file is created
// exclusively and never through a symbolic link; one that cannot be
// written whole is removed.
func writeCredentials(dataDir string, keys []minted) (string, error) {
	var text strings.Builder
	for _, k := range keys {
		text.WriteString(k.line + "\n")
	}
	file := filepath.Join(dataDir, "credentials.env")
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("%s already exists but the database holds no credentials: move it away (it may hold another database's keys) or choose another --data directory", file)
	}
	if err != nil {
		return "", err
	}
	_, werr := f.WriteString(text.String())
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(file)
		return "", fmt.Errorf("write %s: %w", file, err)
	}
	return file, nil
}

// dataDirOf answers the data directory: the one configured, or else the
// SQLite file's directory, or toolplane-data beside a PostgreSQL
// deployment's working directory.
func dataDirOf(database, dataDir string) string {
	switch {
	case dataDir != "":
		return dataDir
	case backend.IsPostgres(database):
		return "toolplane-data"
	}
	return filepath.Dir(database)
}
