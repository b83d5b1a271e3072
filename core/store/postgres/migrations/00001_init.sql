-- The initial schema.
--
-- Every table carries the organization (org_id), and every unique key over tenant data starts
-- with it, so that the tables can be distributed by organization. The two exceptions are the
-- key lookups the contract makes global: a key's client ID and its secret hash are unique across
-- all organizations, because a request names neither its organization.
--
-- Identifiers are opaque text made by the application and compare byte by byte (COLLATE "C").
-- Event bodies, call blocks and client matches are json, not jsonb: json keeps the text exactly
-- as sent, \u0000 escapes and all.

-- +goose Up
CREATE TABLE orgs (
    org_id     text COLLATE "C" NOT NULL,
    name       text             NOT NULL,
    created_at timestamptz      NOT NULL,
    PRIMARY KEY (org_id)
);

CREATE TABLE api_keys (
    client_id    text COLLATE "C" NOT NULL,
    -- NULL for an operator key, which is not locked to any organization.
    org_id       text COLLATE "C" REFERENCES orgs (org_id),
    scopes       text[]           NOT NULL DEFAULT '{}',
    secret_hash  bytea            NOT NULL,
    secret_last8 text             NOT NULL,
    created_at   timestamptz      NOT NULL,
    expires_at   timestamptz,
    revoked_at   timestamptz,
    rotated_at   timestamptz,
    PRIMARY KEY (client_id),
    UNIQUE (secret_hash)
);
CREATE INDEX api_keys_org_idx ON api_keys (org_id, created_at);

CREATE TABLE calls (
    org_id           text COLLATE "C" NOT NULL REFERENCES orgs (org_id),
    id               text COLLATE "C" NOT NULL,
    provider         text COLLATE "C" NOT NULL,
    provider_call_id text COLLATE "C" NOT NULL,
    direction        text             NOT NULL,
    -- The state ladder as an ordinal: 0 unknown, 1 ringing, 2 answered, 3 ended.
    state            smallint         NOT NULL,
    block            json,
    block_sequence   bigint           NOT NULL,
    block_at         timestamptz      NOT NULL,
    first_at         timestamptz      NOT NULL,
    last_at          timestamptz      NOT NULL,
    -- Client-system matches; NULL while no lookup has been made.
    clients          json,
    created_at       timestamptz      NOT NULL,
    updated_at       timestamptz      NOT NULL,
    PRIMARY KEY (org_id, id),
    UNIQUE (org_id, provider, provider_call_id)
);

CREATE TABLE call_events (
    org_id            text COLLATE "C" NOT NULL,
    id                text COLLATE "C" NOT NULL,
    call_id           text COLLATE "C" NOT NULL,
    type              text             NOT NULL,
    dedupe_key        text COLLATE "C" NOT NULL,
    sequence          bigint           NOT NULL,
    -- NULL when the provider gave no event id.
    provider_event_id text,
    -- The reporter's own stamp, as sent.
    occurred_at       timestamptz      NOT NULL,
    -- occurred_at clamped to the server's clock: what events are ordered by.
    order_at          timestamptz      NOT NULL,
    received_at       timestamptz      NOT NULL,
    body              json             NOT NULL,
    PRIMARY KEY (org_id, id),
    UNIQUE (org_id, call_id, dedupe_key),
    FOREIGN KEY (org_id, call_id) REFERENCES calls (org_id, id)
);

-- +goose Down
DROP TABLE call_events;
DROP TABLE calls;
DROP TABLE api_keys;
DROP TABLE orgs;
