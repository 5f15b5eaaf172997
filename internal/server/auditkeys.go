package server

import (
	"path/filepath"
	"time"

	"github.com/toolplane/toolplane/auditchain"
)

// signingKeys answers the operator's audit signing keys
// (Config.AuditSigningKey, or a key file made in the data directory), or
// nil when there are none; a key file that cannot be read is logged and
// leaves the chains unsigned (verification still checks the chain).
func (s *Server) signingKeys() *auditchain.KeySet {
	s.auditKeysOnce.Do(func() {
		path := s.cfg.AuditSigningKey
		if dir := dataDirOf(s.cfg.Database, s.cfg.DataDir); path == "" && dir != "" {
			// Where the node keeps its other files: the SQLite file's
			// directory when no --data names one, as for the key
			// encryption key.
			path = filepath.Join(dir, "audit-signing-keys.json")
		}
		if path == "" {
			return
		}
		ks, err := auditchain.LoadOrGenerate(path, time.Now())
		if err != nil {
			s.log.Error("audit signing keys not loaded: audit checkpoints are not signed", "file", path, "err", err)
			return
		}
		s.auditKeys = ks
	})
	return s.auditKeys
}

// publicAuditKeys answers the public halves of signingKeys, or nil.
func (s *Server) publicAuditKeys() *auditchain.KeySet {
	ks := s.signingKeys()
	if ks == nil {
		return nil
	}
	pub := ks.Public()
	return &pub
}
