package postgresql

import (
	"net"
	"net/url"

	"github.com/cuengine/engine/providers"
)

// Keys of the connection outputs: the keys of the connection Secret.
const (
	KeyUsername = "username"
	KeyPassword = "password"
	KeyDatabase = "database"
	KeyHost     = "host"
	KeyPort     = "port"
	KeyURI      = "uri"
)

// observation is what Apply returns for a database that exists: State for
// the template (no secret in it), Sensitive for the connection Secret. The
// password and the URI carrying it are there only when password is set.
func (p *Provider) observation(n names, password string) providers.Observation {
	host, port := p.hostPort()
	state := map[string]any{
		"database": n.database,
		"role":     n.role,
		"host":     host,
		"port":     port,
	}
	sensitive := map[string][]byte{
		KeyUsername: []byte(n.role),
		KeyDatabase: []byte(n.database),
		KeyHost:     []byte(host),
		KeyPort:     []byte(port),
	}
	if password != "" {
		sensitive[KeyPassword] = []byte(password)
		u := url.URL{Scheme: "postgresql", User: url.UserPassword(n.role, password), Host: net.JoinHostPort(host, port),
			Path: "/" + n.database, RawQuery: "sslmode=" + p.sslMode}
		sensitive[KeyURI] = []byte(u.String())
	}
	return providers.Observation{Exists: true, Ready: true, State: state, Sensitive: sensitive}
}
