package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/callwire/callwire/core/store"
)

// orgColumns is the column list scanOrg reads, in order.
const orgColumns = `org_id, name, created_at, lookup_url, lookup_token, lookup_timeout_ns, time_zone, country, retention_days`

// scanOrg scans one row of orgColumns.
func scanOrg(row pgx.Row) (store.Org, error) {
	var (
		o  store.Org
		ns int64
	)
	if err := row.Scan(&o.ID, &o.Name, &o.CreatedAt, &o.Lookup.URL, &o.Lookup.Token, &ns,
		&o.Region.TimeZone, &o.Region.Country, &o.RetentionDays); err != nil {
		return store.Org{}, err
	}
	o.CreatedAt = utc(o.CreatedAt)
	o.Lookup.Timeout = time.Duration(ns)
	return o, nil
}

// CreateOrg stores a new organization, its lookup and region included; an error wrapping
// store.ErrConflict if the ID exists, store.ErrInvalid if its region or retention is not valid. A zero
// CreatedAt is stored as the database's current time.
func (s *Store) CreateOrg(ctx context.Context, o store.Org) error {
	if err := errors.Join(o.Region.Validate(), store.ValidateRetentionDays(o.RetentionDays)); err != nil {
		return fmt.Errorf("postgres: create org: %w: %w", store.ErrInvalid, err)
	}
	_, err := s.exec(ctx,
		`INSERT INTO orgs (org_id, name, created_at, lookup_url, lookup_token, lookup_timeout_ns, time_zone, country, retention_days)
		VALUES ($1, $2, COALESCE($3, now()), $4, $5, $6, $7, $8, $9)`,
		o.ID, o.Name, nullTime(o.CreatedAt), o.Lookup.URL, o.Lookup.Token, int64(o.Lookup.Timeout),
		o.Region.TimeZone, o.Region.Country, o.RetentionDays)
	if pgCode(err) == codeUniqueViolation {
		return fmt.Errorf("postgres: create org %q: %w", o.ID, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("postgres: create org: %w", err)
	}
	return nil
}

// GetOrg returns the organization, its lookup included, or an error wrapping store.ErrNotFound.
func (s *Store) GetOrg(ctx context.Context, id string) (store.Org, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return store.Org{}, fmt.Errorf("postgres: get org %q: %w", id, err)
	}
	defer conn.Release()
	o, err := scanOrg(conn.QueryRow(ctx, `SELECT `+orgColumns+` FROM orgs WHERE org_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Org{}, fmt.Errorf("postgres: get org %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Org{}, fmt.Errorf("postgres: get org %q: %w", id, classify(ctx, conn, err))
	}
	return o, nil
}

// ListOrgs returns every organization, their lookups included, oldest first (ties by ID).
func (s *Store) ListOrgs(ctx context.Context) ([]store.Org, error) {
	orgs := []store.Org{}
	err := s.query(ctx, `SELECT `+orgColumns+` FROM orgs ORDER BY created_at, org_id`, nil,
		func(rows pgx.Rows) error {
			o, err := scanOrg(rows)
			if err != nil {
				return err
			}
			orgs = append(orgs, o)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("postgres: list orgs: %w", err)
	}
	return orgs, nil
}

// UpdateOrgLookup replaces the organization's lookup with l (a zero l removes it); an error
// wrapping store.ErrNotFound if there is no such organization.
func (s *Store) UpdateOrgLookup(ctx context.Context, orgID string, l store.Lookup) error {
	tag, err := s.exec(ctx, `UPDATE orgs SET lookup_url = $2, lookup_token = $3, lookup_timeout_ns = $4
		WHERE org_id = $1`, orgID, l.URL, l.Token, int64(l.Timeout))
	if err != nil {
		return fmt.Errorf("postgres: update org lookup: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: update org lookup %q: %w", orgID, store.ErrNotFound)
	}
	return nil
}

// UpdateOrgRetention sets the organization's retention in days (0: forever); an error wrapping
// store.ErrNotFound if there is no such organization, store.ErrInvalid if days is not valid.
func (s *Store) UpdateOrgRetention(ctx context.Context, orgID string, days int) error {
	if err := store.ValidateRetentionDays(days); err != nil {
		return fmt.Errorf("postgres: update org retention: %w: %w", store.ErrInvalid, err)
	}
	tag, err := s.exec(ctx, `UPDATE orgs SET retention_days = $2 WHERE org_id = $1`, orgID, days)
	if err != nil {
		return fmt.Errorf("postgres: update org retention: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: update org retention %q: %w", orgID, store.ErrNotFound)
	}
	return nil
}

// UpdateOrgRegion replaces the organization's region with r; an error wrapping
// store.ErrNotFound if there is no such organization, store.ErrInvalid if r is not valid.
func (s *Store) UpdateOrgRegion(ctx context.Context, orgID string, r store.Region) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("postgres: update org region: %w: %w", store.ErrInvalid, err)
	}
	tag, err := s.exec(ctx, `UPDATE orgs SET time_zone = $2, country = $3 WHERE org_id = $1`,
		orgID, r.TimeZone, r.Country)
	if err != nil {
		return fmt.Errorf("postgres: update org region: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: update org region %q: %w", orgID, store.ErrNotFound)
	}
	return nil
}

// keyColumns is the column list scanKey reads, in order.
const keyColumns = `client_id, COALESCE(org_id, ''), scopes, secret_hash, secret_last8,
	created_at, expires_at, revoked_at, rotated_at`

// scanKey scans one row of keyColumns.
func scanKey(row pgx.Row) (store.Key, error) {
	var k store.Key
	err := row.Scan(&k.ClientID, &k.OrgID, &k.Scopes, &k.SecretHash, &k.SecretLast8,
		&k.CreatedAt, &k.ExpiresAt, &k.RevokedAt, &k.RotatedAt)
	if err != nil {
		return store.Key{}, err
	}
	k.CreatedAt = utc(k.CreatedAt)
	k.ExpiresAt = utcPtr(k.ExpiresAt)
	k.RevokedAt = utcPtr(k.RevokedAt)
	k.RotatedAt = utcPtr(k.RotatedAt)
	if len(k.Scopes) == 0 {
		k.Scopes = nil
	}
	return k, nil
}

// CreateKey stores a new key. It fails with an error wrapping store.ErrConflict if the client
// ID or the secret hash is taken, and store.ErrNotFound if k.OrgID is not "" and names no
// organization. A zero CreatedAt is stored as the database's current time.
func (s *Store) CreateKey(ctx context.Context, k store.Key) error {
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	_, err := s.exec(ctx, `INSERT INTO api_keys
		(client_id, org_id, scopes, secret_hash, secret_last8, created_at, expires_at, revoked_at, rotated_at)
		VALUES ($1, NULLIF($2, ''), $3, $4, $5, COALESCE($6, now()), $7, $8, $9)`,
		k.ClientID, k.OrgID, scopes, k.SecretHash, k.SecretLast8, nullTime(k.CreatedAt),
		k.ExpiresAt, k.RevokedAt, k.RotatedAt)
	switch pgCode(err) {
	case codeUniqueViolation:
		return fmt.Errorf("postgres: create key %q: client id or secret hash: %w", k.ClientID, store.ErrConflict)
	case codeForeignKeyViolation:
		return fmt.Errorf("postgres: create key %q: org %q: %w", k.ClientID, k.OrgID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("postgres: create key: %w", err)
	}
	return nil
}

// KeyByClientID returns the key, revoked and expired ones included, or an error wrapping
// store.ErrNotFound.
func (s *Store) KeyByClientID(ctx context.Context, clientID string) (store.Key, error) {
	k, err := s.oneKey(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE client_id = $1`, clientID)
	if err != nil {
		return store.Key{}, fmt.Errorf("postgres: key by client id: %w", err)
	}
	return k, nil
}

// KeyBySecretHash returns the key whose secret hashes to hash, revoked and expired ones
// included, or an error wrapping store.ErrNotFound.
func (s *Store) KeyBySecretHash(ctx context.Context, hash []byte) (store.Key, error) {
	k, err := s.oneKey(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE secret_hash = $1`, hash)
	if err != nil {
		return store.Key{}, fmt.Errorf("postgres: key by secret hash: %w", err)
	}
	return k, nil
}

// oneKey runs a query for at most one key.
func (s *Store) oneKey(ctx context.Context, sql string, arg any) (store.Key, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return store.Key{}, err
	}
	defer conn.Release()
	k, err := scanKey(conn.QueryRow(ctx, sql, arg))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Key{}, store.ErrNotFound
	}
	if err != nil {
		return store.Key{}, classify(ctx, conn, err)
	}
	return k, nil
}

// ListKeys returns the organization's keys, oldest first (ties by client ID); orgID "" lists
// the operator keys.
func (s *Store) ListKeys(ctx context.Context, orgID string) ([]store.Key, error) {
	keys := []store.Key{}
	err := s.query(ctx, `SELECT `+keyColumns+` FROM api_keys
		WHERE org_id IS NOT DISTINCT FROM NULLIF($1, '')
		ORDER BY created_at, client_id`, []any{orgID},
		func(rows pgx.Rows) error {
			k, err := scanKey(rows)
			if err != nil {
				return err
			}
			keys = append(keys, k)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("postgres: list keys: %w", err)
	}
	return keys, nil
}

// RevokeKey marks the key revoked at the given time, keeping the first time when it is revoked
// already; an error wrapping store.ErrNotFound if there is no such key.
func (s *Store) RevokeKey(ctx context.Context, clientID string, at time.Time) error {
	tag, err := s.exec(ctx,
		`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE client_id = $1`, clientID, at)
	if err != nil {
		return fmt.Errorf("postgres: revoke key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: revoke key %q: %w", clientID, store.ErrNotFound)
	}
	return nil
}

// RotateKey replaces the key's secret hash and last eight characters and records the time; the
// old secret stops working at once. It fails with an error wrapping store.ErrNotFound if there
// is no such key, store.ErrConflict if another key holds hash.
func (s *Store) RotateKey(ctx context.Context, clientID string, hash []byte, last8 string, at time.Time) error {
	tag, err := s.exec(ctx, `UPDATE api_keys SET secret_hash = $2, secret_last8 = $3, rotated_at = $4
		WHERE client_id = $1`, clientID, hash, last8, at)
	if pgCode(err) == codeUniqueViolation {
		return fmt.Errorf("postgres: rotate key %q: secret hash: %w", clientID, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("postgres: rotate key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: rotate key %q: %w", clientID, store.ErrNotFound)
	}
	return nil
}
