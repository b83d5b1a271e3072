package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/callwire/callwire/core/store"
)

// orgColumns are the columns scanOrg reads, in its order.
const orgColumns = `org_id, name, created_at, lookup_url, lookup_token, lookup_timeout_ns, time_zone, country, retention_days`

// scanOrg reads one row of orgColumns.
func scanOrg(row interface{ Scan(...any) error }) (store.Org, error) {
	var (
		o  store.Org
		ns int64
	)
	if err := row.Scan(&o.ID, &o.Name, timeCol{&o.CreatedAt}, &o.Lookup.URL, &o.Lookup.Token, &ns,
		&o.Region.TimeZone, &o.Region.Country, &o.RetentionDays); err != nil {
		return store.Org{}, err
	}
	o.Lookup.Timeout = time.Duration(ns)
	return o, nil
}

// CreateOrg stores a new organization, its lookup and region included; store.ErrConflict if the
// ID exists, store.ErrInvalid if its region or retention is not valid.
func (s *Store) CreateOrg(ctx context.Context, o store.Org) error {
	if err := errors.Join(o.Region.Validate(), store.ValidateRetentionDays(o.RetentionDays)); err != nil {
		return fmt.Errorf("sqlite: create org: %w: %w", store.ErrInvalid, err)
	}
	return s.withWriteTx(ctx, "create org", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO orgs (`+orgColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			o.ID, o.Name, encTime(o.CreatedAt), o.Lookup.URL, o.Lookup.Token, int64(o.Lookup.Timeout),
			o.Region.TimeZone, o.Region.Country, o.RetentionDays)
		return err
	})
}

// GetOrg returns the organization, its lookup included, or store.ErrNotFound.
func (s *Store) GetOrg(ctx context.Context, id string) (store.Org, error) {
	o, err := scanOrg(s.reader.QueryRowContext(ctx, `SELECT `+orgColumns+` FROM orgs WHERE org_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Org{}, fmt.Errorf("sqlite: get org %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Org{}, wrapErr(ctx, "get org", err)
	}
	return o, nil
}

// ListOrgs returns every organization, their lookups included, oldest first.
func (s *Store) ListOrgs(ctx context.Context) ([]store.Org, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+orgColumns+` FROM orgs ORDER BY created_at, org_id`)
	if err != nil {
		return nil, wrapErr(ctx, "list orgs", err)
	}
	orgs, err := collect(rows, scanOrg)
	if err != nil {
		return nil, wrapErr(ctx, "list orgs", err)
	}
	return orgs, nil
}

// UpdateOrgLookup replaces the organization's lookup with l (a zero l removes it);
// store.ErrNotFound if there is no such organization.
func (s *Store) UpdateOrgLookup(ctx context.Context, orgID string, l store.Lookup) error {
	return s.withWriteTx(ctx, "update org lookup", func(tx *sql.Tx) error {
		return updateOrg(ctx, tx, orgID, `UPDATE orgs SET lookup_url = ?, lookup_token = ?, lookup_timeout_ns = ?
			WHERE org_id = ?`, l.URL, l.Token, int64(l.Timeout), orgID)
	})
}

// UpdateOrgRetention sets the organization's retention in days (0: forever); store.ErrNotFound
// if there is no such organization, store.ErrInvalid if days is not valid.
func (s *Store) UpdateOrgRetention(ctx context.Context, orgID string, days int) error {
	if err := store.ValidateRetentionDays(days); err != nil {
		return fmt.Errorf("sqlite: update org retention: %w: %w", store.ErrInvalid, err)
	}
	return s.withWriteTx(ctx, "update org retention", func(tx *sql.Tx) error {
		return updateOrg(ctx, tx, orgID, `UPDATE orgs SET retention_days = ? WHERE org_id = ?`, days, orgID)
	})
}

// UpdateOrgRegion replaces the organization's region with r; store.ErrNotFound if there is no
// such organization, store.ErrInvalid if r is not valid.
func (s *Store) UpdateOrgRegion(ctx context.Context, orgID string, r store.Region) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("sqlite: update org region: %w: %w", store.ErrInvalid, err)
	}
	return s.withWriteTx(ctx, "update org region", func(tx *sql.Tx) error {
		return updateOrg(ctx, tx, orgID, `UPDATE orgs SET time_zone = ?, country = ? WHERE org_id = ?`,
			r.TimeZone, r.Country, orgID)
	})
}

// updateOrg runs an UPDATE of one organization's row; store.ErrNotFound when it changed no row.
func updateOrg(ctx context.Context, tx *sql.Tx, orgID, query string, args ...any) error {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("org %q: %w", orgID, store.ErrNotFound)
	}
	return nil
}

// keyColumns are the columns scanKey reads, in its order.
const keyColumns = `client_id, org_id, scopes, secret_hash, secret_last8, created_at, expires_at, revoked_at, rotated_at`

// scanKey reads one row of keyColumns.
func scanKey(row interface{ Scan(...any) error }) (store.Key, error) {
	var (
		k      store.Key
		orgID  sql.NullString
		scopes string
	)
	err := row.Scan(&k.ClientID, &orgID, &scopes, &k.SecretHash, &k.SecretLast8, timeCol{&k.CreatedAt},
		timePtrCol{&k.ExpiresAt}, timePtrCol{&k.RevokedAt}, timePtrCol{&k.RotatedAt})
	if err != nil {
		return store.Key{}, err
	}
	k.OrgID = orgID.String
	if err := json.Unmarshal([]byte(scopes), &k.Scopes); err != nil {
		return store.Key{}, fmt.Errorf("key %q: stored scopes: %w", k.ClientID, err)
	}
	return k, nil
}

// orgArg returns the stored form of a key's organization: NULL for an operator key.
func orgArg(orgID string) any {
	if orgID == "" {
		return nil
	}
	return orgID
}

// CreateKey stores a new key; store.ErrConflict if the client ID or secret hash exists,
// store.ErrNotFound if k.OrgID names no organization. An empty k.OrgID makes an operator key.
func (s *Store) CreateKey(ctx context.Context, k store.Key) error {
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	scopesJSON, err := json.Marshal(scopes)
	if err != nil {
		return fmt.Errorf("sqlite: create key: scopes: %w", err)
	}
	return s.withWriteTx(ctx, "create key", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			k.ClientID, orgArg(k.OrgID), string(scopesJSON), k.SecretHash, k.SecretLast8, encTime(k.CreatedAt),
			encTimePtr(k.ExpiresAt), encTimePtr(k.RevokedAt), encTimePtr(k.RotatedAt))
		return err
	})
}

// KeyByClientID returns the key, revoked and expired ones included, or store.ErrNotFound.
func (s *Store) KeyByClientID(ctx context.Context, clientID string) (store.Key, error) {
	k, err := scanKey(s.reader.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE client_id = ?`, clientID))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Key{}, fmt.Errorf("sqlite: key %q: %w", clientID, store.ErrNotFound)
	}
	if err != nil {
		return store.Key{}, wrapErr(ctx, "key by client id", err)
	}
	return k, nil
}

// KeyBySecretHash returns the key whose secret hashes to hash, revoked and expired ones included,
// or store.ErrNotFound.
func (s *Store) KeyBySecretHash(ctx context.Context, hash []byte) (store.Key, error) {
	k, err := scanKey(s.reader.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE secret_hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Key{}, fmt.Errorf("sqlite: key by secret hash: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Key{}, wrapErr(ctx, "key by secret hash", err)
	}
	return k, nil
}

// ListKeys returns the organization's keys, oldest first; orgID "" lists operator keys.
func (s *Store) ListKeys(ctx context.Context, orgID string) ([]store.Key, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+keyColumns+` FROM api_keys
		WHERE org_id IS ? ORDER BY created_at, client_id`, orgArg(orgID))
	if err != nil {
		return nil, wrapErr(ctx, "list keys", err)
	}
	keys, err := collect(rows, scanKey)
	if err != nil {
		return nil, wrapErr(ctx, "list keys", err)
	}
	return keys, nil
}

// RevokeKey marks the key revoked at the given time, keeping an earlier revocation's time;
// store.ErrNotFound if there is no such key.
func (s *Store) RevokeKey(ctx context.Context, clientID string, at time.Time) error {
	return s.withWriteTx(ctx, "revoke key", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE client_id = ?`,
			encTime(at), clientID)
		return updatedOne(res, err, clientID)
	})
}

// RotateKey replaces the key's secret hash and last eight characters and records when;
// store.ErrNotFound if there is no such key, store.ErrConflict if another key holds the hash.
func (s *Store) RotateKey(ctx context.Context, clientID string, hash []byte, last8 string, at time.Time) error {
	return s.withWriteTx(ctx, "rotate key", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET secret_hash = ?, secret_last8 = ?, rotated_at = ?
			WHERE client_id = ?`, hash, last8, encTime(at), clientID)
		return updatedOne(res, err, clientID)
	})
}

// updatedOne turns an UPDATE of the key clientID that matched no row into store.ErrNotFound.
func updatedOne(res sql.Result, err error, clientID string) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("key %q: %w", clientID, store.ErrNotFound)
	}
	return nil
}

// collect scans every row with scan and closes rows. It returns nil for no rows.
func collect[T any](rows *sql.Rows, scan func(interface{ Scan(...any) error }) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
