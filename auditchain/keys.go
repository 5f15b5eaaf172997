package auditchain

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/toolplane/toolplane"
)

// ErrNoKey: a key set holds no private key to sign with.
var ErrNoKey = errors.New("audit signing key set holds no key")

// A Key is one of the operator's signing keys.
type Key struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	// Private is the Ed25519 seed (32 bytes); absent from a published set.
	Private []byte `json:"private_key,omitempty"`
	Public  []byte `json:"public_key"`
}

// KeySet is the operator's signing keys, oldest first: the newest signs,
// every one verifies, so a key is rotated by adding one (Generate) and the
// checkpoints signed by the keys before still verify. It is the JSON of a
// key file (with private keys) and of the published set (without).
type KeySet struct {
	Keys []Key `json:"keys"`
}

// Generate adds a fresh key, which signs from now on, made at now.
func (ks *KeySet) Generate(now time.Time) (Key, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Key{}, fmt.Errorf("generate audit signing key: %w", err)
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Key{}, fmt.Errorf("generate audit signing key: %w", err)
	}
	k := Key{ID: fmt.Sprintf("k%x", id), CreatedAt: now.UTC().Truncate(time.Second), Private: priv.Seed(), Public: pub}
	ks.Keys = append(ks.Keys, k)
	return k, nil
}

// Public answers the set without its private keys: what is published.
func (ks *KeySet) Public() KeySet {
	out := KeySet{Keys: make([]Key, len(ks.Keys))}
	for i, k := range ks.Keys {
		k.Private = nil
		out.Keys[i] = k
	}
	return out
}

// public answers the public key named id, or nil.
func (ks *KeySet) public(id string) ed25519.PublicKey {
	for _, k := range ks.Keys {
		if k.ID == id && len(k.Public) == ed25519.PublicKeySize {
			return k.Public
		}
	}
	return nil
}

// Sign signs cp with the set's newest key, setting its KeyID and
// Signature.
func (ks *KeySet) Sign(cp *toolplane.AuditCheckpoint) error {
	for i := len(ks.Keys) - 1; i >= 0; i-- {
		k := ks.Keys[i]
		if len(k.Private) != ed25519.SeedSize {
			continue
		}
		cp.KeyID = k.ID
		cp.Signature = ed25519.Sign(ed25519.NewKeyFromSeed(k.Private), CheckpointMessage(cp))
		return nil
	}
	return ErrNoKey
}

// CheckpointMessage is the canonical encoding of cp that its signature
// covers: everything but the signature.
func CheckpointMessage(cp *toolplane.AuditCheckpoint) []byte {
	w := encoder{buf: make([]byte, 0, 128)}
	w.buf = append(w.buf, "toolplane-audit-checkpoint/1\x00"...)
	w.str(cp.OrganizationID)
	w.int(cp.Seq)
	w.bytes(cp.Hash)
	w.int(cp.CreatedAt.UnixMicro())
	w.str(cp.KeyID)
	return w.buf
}

// checkSignature answers whether cp's signature is its key's, and whether
// the set knows the key.
func (ks *KeySet) checkSignature(cp *toolplane.AuditCheckpoint) (known, ok bool) {
	pub := ks.public(cp.KeyID)
	if pub == nil {
		return false, false
	}
	return true, ed25519.Verify(pub, CheckpointMessage(cp), cp.Signature)
}

// LoadKeys reads a key set from path (a key file, or a published set).
func LoadKeys(path string) (*KeySet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read audit keys: %w", err)
	}
	var ks KeySet
	if err := json.Unmarshal(b, &ks); err != nil {
		return nil, fmt.Errorf("read audit keys %s: %w", path, err)
	}
	for _, k := range ks.Keys {
		if len(k.Public) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("read audit keys %s: key %q has no Ed25519 public key", path, k.ID)
		}
		if len(k.Private) != 0 && !ed25519.NewKeyFromSeed(k.Private).Public().(ed25519.PublicKey).Equal(ed25519.PublicKey(k.Public)) {
			return nil, fmt.Errorf("read audit keys %s: key %q: private and public keys differ", path, k.ID)
		}
	}
	return &ks, nil
}

// SaveKeys writes ks to path, readable by its owner only, atomically (a
// temporary file renamed over it).
func SaveKeys(path string, ks *KeySet) error {
	b, err := json.MarshalIndent(ks, "", "  ")
	if err != nil {
		return fmt.Errorf("write audit keys: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".audit-keys-*")
	if err != nil {
		return fmt.Errorf("write audit keys: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write audit keys: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write audit keys: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write audit keys: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write audit keys: %w", err)
	}
	return nil
}

// LoadOrGenerate reads the key file at path, or makes one with a fresh key
// when there is none: what `serve` does with its data directory.
func LoadOrGenerate(path string, now time.Time) (*KeySet, error) {
	ks, err := LoadKeys(path)
	if err == nil {
		if len(ks.Keys) == 0 {
			return nil, fmt.Errorf("audit keys %s: %w", path, ErrNoKey)
		}
		return ks, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ks = &KeySet{}
	if _, err := ks.Generate(now); err != nil {
		return nil, err
	}
	if err := SaveKeys(path, ks); err != nil {
		return nil, err
	}
	return ks, nil
}
