package server

import (
	"crypto/tls"

	"github.com/toolplane/toolplane/clientcert"
	"github.com/toolplane/toolplane/tlscert"
)

// loadCertificates reads the API's certificate pair (Config.TLSCert,
// TLSKey), the client CA bundle (ClientCA) and the revocation list
// (ClientCertRevoked), when set: a file that is missing, unreadable, not
// PEM, or a key that is not the certificate's fails the start with a
// *ConfigError naming it.
func (s *Server) loadCertificates() error {
	cfg := s.cfg
	if cfg.TLSCert != "" {
		r, err := tlscert.New(cfg.TLSCert, cfg.TLSKey, s.log)
		if err != nil {
			return &ConfigError{Field: "TLSCert", Err: err}
		}
		s.tls = r
	}
	if cfg.ClientCA == "" {
		return nil
	}
	a, err := clientcert.LoadAuthority(cfg.ClientCA)
	if err != nil {
		return &ConfigError{Field: "ClientCA", Err: err}
	}
	a.TrustDomain = cfg.SPIFFETrustDomain
	if cfg.ClientCertRevoked != "" {
		if a.Revoked, err = clientcert.LoadRevocations(cfg.ClientCertRevoked, s.log); err != nil {
			return &ConfigError{Field: "ClientCertRevoked", Err: err}
		}
	}
	s.certs = a
	return nil
}

// scheme answers the API's URL scheme: https when it serves TLS.
func (s *Server) scheme() string {
	if s.tls != nil {
		return "https"
	}
	return "http"
}

// tlsConfig answers the API listener's TLS configuration (nil without
// TLS): the reloaded certificate, and, with a client CA, a request for a
// client certificate. The handshake does not verify it (RequestClientCert):
// the door layer does, so that an expired, revoked or foreign certificate
// is answered with its reason in the API's own words rather than a TLS
// alert, and a client without one still reaches the routes that need none.
func (s *Server) tlsConfig() *tls.Config {
	if s.tls == nil {
		return nil
	}
	c := s.tls.Config()
	if s.certs != nil {
		c.ClientAuth = tls.RequestClientCert
		c.ClientCAs = s.certs.Pool()
	}
	return c
}

// certificateRevoked answers the live principal's check of a call made
// with a client certificate, or nil when no revocation list is kept.
func (s *Server) certificateRevoked() func(serial string) bool {
	if s.certs == nil || s.certs.Revoked == nil {
		return nil
	}
	return s.certs.Revoked.Has
}
