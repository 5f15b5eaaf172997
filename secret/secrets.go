package secret

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolplane/toolplane"
)

// ConnectionAAD is the additional data a connection's secret is sealed
// with: its organization and ID, so a sealed secret copied to another
// connection, or another organization's, does not open there. The
// organization "oauth-state" is refused by SealSecrets and OpenSecrets,
// since its connections would share the additional data of StateAAD.
func ConnectionAAD(org, id string) []byte {
	return []byte(org + "/" + id)
}

// StateAAD is the additional data an authorization's PKCE verifier
// (OAuthState.Verifier) is sealed with: the state's ID.
func StateAAD(stateID string) []byte {
	return []byte(stateOrg + "/" + stateID)
}

// plainSecrets is toolplane.Secrets with its values in clear: a
// SecretString marshals as its placeholder on purpose, so sealing
// marshals this instead. Its field names are the sealed format: a name
// never changes once written.
type plainSecrets struct {
	Token        string `json:"token,omitempty"`
	Username     string `json:"username,omitempty"`
	Password     string `json:"password,omitempty"`
	DSN          string `json:"dsn,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	AccessToken  string `json:"access_token,omitempty"`
	RefreshToken string `json:"refresh_token,omitempty"`
}

// stateOrg is the organization ID whose connections' additional data
// would be an authorization state's (see StateAAD).
const stateOrg = "oauth-state"

// checkRow refuses an organization or connection ID holding the separator
// of ConnectionAAD, with which two rows could share additional data, and
// the organization whose rows would share a state's.
func checkRow(org, id string) error {
	if org == "" || id == "" || strings.Contains(org, "/") || strings.Contains(id, "/") {
		return fmt.Errorf("%w: a connection's organization and ID are not empty and hold no '/'", toolplane.ErrInvalid)
	}
	if org == stateOrg {
		return fmt.Errorf("%w: the organization ID %s is reserved", toolplane.ErrInvalid, stateOrg)
	}
	return nil
}

// SealSecrets seals a connection's secrets for the connection id of the
// organization org: what the store keeps as Connection.Secret.
func SealSecrets(k *Keyring, org, id string, s toolplane.Secrets) ([]byte, error) {
	if err := checkRow(org, id); err != nil {
		return nil, err
	}
	p := plainSecrets{
		Token:        s.Token.Reveal(),
		Username:     s.Username.Reveal(),
		Password:     s.Password.Reveal(),
		DSN:          s.DSN.Reveal(),
		ClientSecret: s.ClientSecret.Reveal(),
		AccessToken:  s.AccessToken.Reveal(),
		RefreshToken: s.RefreshToken.Reveal(),
	}
	plain, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("seal secrets of %s: %w", id, err)
	}
	// The strings cannot be cleared; the marshalled copy can.
	defer clear(plain)
	b, err := k.Seal(plain, ConnectionAAD(org, id))
	if err != nil {
		return nil, fmt.Errorf("seal secrets of %s: %w", id, err)
	}
	return b, nil
}

// OpenSecrets opens what SealSecrets sealed for the same connection. A
// connection holding no secret (an empty Secret: an authorization not
// yet completed) answers empty Secrets. Its errors are Open's, naming
// the connection and never a value.
func OpenSecrets(k *Keyring, org, id string, sealed []byte) (toolplane.Secrets, error) {
	if err := checkRow(org, id); err != nil {
		return toolplane.Secrets{}, err
	}
	if len(sealed) == 0 {
		return toolplane.Secrets{}, nil
	}
	plain, err := k.Open(sealed, ConnectionAAD(org, id))
	if err != nil {
		return toolplane.Secrets{}, fmt.Errorf("open secrets of %s: %w", id, err)
	}
	defer clear(plain)
	var p plainSecrets
	if err := json.Unmarshal(plain, &p); err != nil {
		// json's syntax errors quote no input, only an offset; still, the
		// error is replaced, since its text is the decoder's to change.
		return toolplane.Secrets{}, fmt.Errorf("open secrets of %s: %w: the sealed value is not a secrets object", id, ErrMalformed)
	}
	return toolplane.Secrets{
		Token:        toolplane.SecretString(p.Token),
		Username:     toolplane.SecretString(p.Username),
		Password:     toolplane.SecretString(p.Password),
		DSN:          toolplane.SecretString(p.DSN),
		ClientSecret: toolplane.SecretString(p.ClientSecret),
		AccessToken:  toolplane.SecretString(p.AccessToken),
		RefreshToken: toolplane.SecretString(p.RefreshToken),
	}, nil
}

// SealVerifier seals an authorization's PKCE code verifier for the state
// stateID: what the store keeps as OAuthState.Verifier.
func SealVerifier(k *Keyring, stateID string, verifier toolplane.SecretString) ([]byte, error) {
	plain := []byte(verifier.Reveal())
	defer clear(plain)
	b, err := k.Seal(plain, StateAAD(stateID))
	if err != nil {
		return nil, fmt.Errorf("seal the verifier of an authorization: %w", err)
	}
	return b, nil
}

// OpenVerifier opens what SealVerifier sealed for the same state.
func OpenVerifier(k *Keyring, stateID string, sealed []byte) (toolplane.SecretString, error) {
	plain, err := k.Open(sealed, StateAAD(stateID))
	if err != nil {
		return "", fmt.Errorf("open the verifier of an authorization: %w", err)
	}
	defer clear(plain)
	return toolplane.SecretString(plain), nil
}
