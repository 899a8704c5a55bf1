package postgresql

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cuengine/engine/providers"
)

// Name is the provider name templates use: resources: x: provider: "postgresql".
const Name = "postgresql"

// DefaultCallTimeout bounds each statement when Options.CallTimeout is zero.
const DefaultCallTimeout = 30 * time.Second

var _ providers.Provider = (*Provider)(nil)

// Options configure a Provider.
type Options struct {
	// ConnString is the admin connection (a libpq key=value string or a
	// postgres:// URI). Empty means libpq's environment alone: PGHOST,
	// PGPORT, PGUSER, PGPASSWORD, PGSSLMODE, PGDATABASE...
	ConnString string
	// ClientHost and ClientPort are the address written into connection
	// Secrets, for when applications reach the server by another name than
	// the engine does. Empty or zero means the admin connection's.
	ClientHost string
	ClientPort int
	// CallTimeout bounds every statement. Zero means DefaultCallTimeout.
	CallTimeout time.Duration
	// MaxConns bounds the admin connections. Zero means 4.
	MaxConns int32
}

// Provider manages databases and their login roles on one server. It is
// safe for concurrent use and holds one connection pool for the process.
type Provider struct {
	pool        *pgxpool.Pool
	clientHost  string
	clientPort  int
	sslMode     string
	callTimeout time.Duration
	// secret is the admin password, scrubbed from every error.
	secret string
}

// New returns a Provider with a connection pool; it connects on first use.
// An admin connection that cannot be parsed is a terminal CredentialsError
// whose message carries none of the connection string.
func New(ctx context.Context, opts Options) (*Provider, error) {
	cfg, err := pgxpool.ParseConfig(opts.ConnString)
	if err != nil {
		return nil, providers.Terminal(providers.ReasonCredentialsError,
			"parsing the admin connection: the connection string or the PG* environment is not valid (%s)", connHelp)
	}
	cfg.MaxConns = opts.MaxConns
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 4
	}
	if cfg.ConnConfig.Database == "" {
		cfg.ConnConfig.Database = "postgres"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, providers.Terminal(providers.ReasonCredentialsError, "creating the admin connection pool: %s", scrub(err.Error(), cfg.ConnConfig.Password))
	}
	p := &Provider{
		pool: pool, clientHost: opts.ClientHost, clientPort: opts.ClientPort,
		sslMode: "disable", callTimeout: opts.CallTimeout, secret: cfg.ConnConfig.Password,
	}
	if cfg.ConnConfig.TLSConfig != nil {
		p.sslMode = "require"
	}
	if p.clientHost == "" {
		p.clientHost = cfg.ConnConfig.Host
	}
	if p.clientPort == 0 {
		p.clientPort = int(cfg.ConnConfig.Port)
	}
	if p.callTimeout <= 0 {
		p.callTimeout = DefaultCallTimeout
	}
	return p, nil
}

// connHelp names the ways to configure the admin connection, never values.
const connHelp = "set PGHOST, PGPORT, PGUSER, PGPASSWORD and PGSSLMODE, or ENGINE_POSTGRESQL_DSN_FILE; " +
	"the admin role needs CREATEDB and CREATEROLE"

// Register adds p to r under Name.
func Register(r *providers.Registry, p *Provider) { r.Register(Name, p) }

// Close releases the pool.
func (p *Provider) Close() { p.pool.Close() }

// ExternalName returns the database's physical name, and the role's in
// Settings ({"role": ...}). It makes no call: both are checked against the
// naming rules, and a violation is a terminal InvalidName.
func (p *Provider) ExternalName(_ context.Context, req providers.Request, attempt int) (string, map[string]string, error) {
	spec, err := parseSpec(req.Spec)
	if err != nil {
		return "", nil, err
	}
	if err := validateOwnerUID(req.Owner.UID); err != nil {
		return "", nil, err
	}
	if attempt < 0 {
		return "", nil, providers.Terminal(providers.ReasonProviderError, "naming attempt %d is negative", attempt)
	}
	suffix := nameSuffix(req.Owner.UID, req.Name, attempt)
	return physicalName(spec.Database, suffix), map[string]string{settingRole: physicalName(spec.Owner, suffix)}, nil
}

// names are the validated physical names of one request.
type names struct {
	database, role string
}

// recordedNames reads and checks the recorded names before any SQL.
func recordedNames(req providers.Request) (names, error) {
	n := names{database: req.ExternalName, role: req.Settings[settingRole]}
	if err := validatePhysicalName("database", n.database); err != nil {
		return names{}, err
	}
	if err := validatePhysicalName("role", n.role); err != nil {
		return names{}, err
	}
	return n, nil
}

// withTimeout runs fn with its own deadline of p.callTimeout.
func (p *Provider) withTimeout(ctx context.Context, fn func(ctx context.Context) error) error {
	callCtx, cancel := context.WithTimeout(ctx, p.callTimeout)
	defer cancel()
	err := fn(callCtx)
	if err != nil && ctx.Err() == nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within the per-statement timeout of %s: %w", p.callTimeout, err)
	}
	return err
}

func (p *Provider) hostPort() (string, string) {
	return p.clientHost, strconv.Itoa(p.clientPort)
}
