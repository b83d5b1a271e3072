-- Times are TEXT in one fixed-width UTC layout, 2006-01-02T15:04:05.000000000Z, so that comparing
-- and sorting the text compares and sorts the instants.

-- +goose Up
CREATE TABLE orgs (
    org_id     TEXT NOT NULL PRIMARY KEY,
    name       TEXT NOT NULL,
    created_at TEXT NOT NULL
) STRICT;

CREATE INDEX orgs_by_age ON orgs (created_at, org_id);

-- org_id is NULL for an operator key, which no organization owns. Client IDs and secret hashes are
-- unique across all organizations: a request names only the key, never the organization.
CREATE TABLE api_keys (
    org_id       TEXT REFERENCES orgs (org_id),
    client_id    TEXT NOT NULL PRIMARY KEY,
    scopes       TEXT NOT NULL,
    secret_hash  BLOB NOT NULL UNIQUE,
    secret_last8 TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    expires_at   TEXT,
    revoked_at   TEXT,
    rotated_at   TEXT
) STRICT;

CREATE INDEX api_keys_by_org ON api_keys (org_id, created_at, client_id);

CREATE TABLE calls (
    org_id           TEXT NOT NULL REFERENCES orgs (org_id),
    call_id          TEXT NOT NULL,
    provider         TEXT NOT NULL,
    provider_call_id TEXT NOT NULL,
    direction        TEXT NOT NULL,
    state            INTEGER NOT NULL,
    block            TEXT,
    block_seq        INTEGER NOT NULL,
    block_at         TEXT NOT NULL,
    first_at         TEXT NOT NULL,
    last_at          TEXT NOT NULL,
    clients          TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    PRIMARY KEY (org_id, call_id),
    UNIQUE (org_id, provider, provider_call_id)
) STRICT;

CREATE TABLE call_events (
    org_id            TEXT NOT NULL,
    event_id          TEXT NOT NULL,
    call_id           TEXT NOT NULL,
    type              TEXT NOT NULL,
    dedupe_key        TEXT NOT NULL,
    sequence          INTEGER NOT NULL,
    provider_event_id TEXT NOT NULL,
    occurred_at       TEXT NOT NULL,
    order_at          TEXT NOT NULL,
    received_at       TEXT NOT NULL,
    body              TEXT NOT NULL,
    PRIMARY KEY (org_id, event_id),
    UNIQUE (org_id, call_id, dedupe_key),
    FOREIGN KEY (org_id, call_id) REFERENCES calls (org_id, call_id)
) STRICT;

-- +goose Down
DROP TABLE call_events;
DROP TABLE calls;
DROP TABLE api_keys;
DROP TABLE orgs;
