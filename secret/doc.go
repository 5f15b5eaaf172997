// Package secret seals connection secrets at rest, and reads them from
// Vault where an organization keeps them there.
//
// # Envelope encryption
//
// Every sealed secret has a data key of its own (DEK): 32 random bytes,
// used once, under which the plaintext is sealed with AES-256-GCM. The data
// key is kept beside the ciphertext wrapped, again with AES-256-GCM, by a
// key-encryption key (KEK) of the node's Keyring, whose id the sealed
// bytes name (the format is documented at Version1). A secret is sealed
// for one row: a connection's with ConnectionAAD (its organization and
// ID), an authorization's PKCE verifier with StateAAD. Sealed bytes copied
// to another row do not open there.
//
// The keyring comes from TOOLPLANE_KEK or from a key file readable by its
// owner only (LoadKeyring). The embedded default creates that file beside
// its database at first start (EnsureKeyFile); a deployment of several
// nodes gives every node the same keys, from its secret manager.
//
// # Rotating the key-encryption key
//
// Changing the KEK never re-encrypts a secret: only the data keys are
// wrapped again (Rewrap), and the ciphertexts stay as they are. Calls keep
// working throughout because every node can open what is wrapped by
// either key while both are in its ring:
//
//  1. Make a new key and put it first (current) in every node's keyring,
//     keeping the old key after it; restart the nodes. From then on every
//     secret sealed, on any node, is under the new key. Do not go on until
//     every node runs with the new ring: a node still sealing under the
//     old key would undo the next step.
//  2. Run the rotation (RewrapAll) once, from any node or the command
//     line: it walks every organization's connections and rewraps what is
//     still under an old key, safely beside nodes updating connections.
//     Its report counts what it did; an error wrapping ErrIncomplete means
//     some connection is still under an old key (logged by ID): fix the
//     cause and run it again.
//  3. Remove the old key from every keyring and restart the nodes. A
//     secret still under it would now answer *UnknownKeyError, naming the
//     key.
//
// Authorizations under way (OAuthState.Verifier) are sealed with the same
// keyring but are not walked: a state lives minutes, so waiting for the
// states sealed under the old key to expire (their lifetime, after step 1)
// before step 3 is enough.
//
// # Vault
//
// A connection's secret may live in Vault (or OpenBao) instead of the
// store: Vault reads and writes the KV version 2 secrets engine over its
// HTTP API, and ReadSecrets maps an entry's keys onto toolplane.Secrets.
// The connection broker reads a connection's entry through it, keeping
// what it read for a short while (see package connection). Package
// vaulttest imitates the documented KV version 2 API for tests; it is not
// a real Vault, and TestVaultDevServer holds a real dev server, when one
// is installed, to the same checks.
package secret
