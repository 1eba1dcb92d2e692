package tlsx

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
)

// RequireClientName makes c, a server's mutual TLS configuration, accept
// only client certificates that are valid for name as well: name is one of
// the certificate's DNS names (a wildcard name matches as it would for a
// host) or, when name is an IP address, one of its IP addresses. That is
// what envoyproxy/ratelimit checks of a client with GRPC_CLIENT_TLS_SAN.
// The configurations c's GetConfigForClient hands out check it too. A
// refused certificate is logged at warn, with its subject and serial. With
// an empty name, c is returned unchanged.
func RequireClientName(c *tls.Config, name string, logger *slog.Logger) *tls.Config {
	if name == "" {
		return c
	}
	verify := func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("server: no client certificate")
		}
		leaf := cs.PeerCertificates[0]
		if err := leaf.VerifyHostname(name); err != nil {
			logger.Warn("client certificate refused: not valid for RLS_GRPC_TLS_CLIENT_SAN", "san", name,
				"subject", leaf.Subject.String(), "serial", leaf.SerialNumber.String(), "dns_names", leaf.DNSNames)
			return fmt.Errorf("server: client certificate not valid for %q: %w", name, err)
		}
		return nil
	}
	c.VerifyConnection = verify
	if forClient := c.GetConfigForClient; forClient != nil {
		c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			cc, err := forClient(hello)
			if cc != nil {
				cc.VerifyConnection = verify
			}
			return cc, err
		}
	}
	return c
}
