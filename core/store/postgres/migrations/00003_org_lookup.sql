-- An organization's caller lookup: the URL of its client system's adapter ('' for none), the
-- bearer token sent to it ('' for none; kept as given because callwire must present it), and the
-- timeout of one request in nanoseconds (0 for the server's default).

-- +goose Up
ALTER TABLE orgs
    ADD COLUMN lookup_url        text   NOT NULL DEFAULT '',
    ADD COLUMN lookup_token      text   NOT NULL DEFAULT '',
    ADD COLUMN lookup_timeout_ns bigint NOT NULL DEFAULT 0 CHECK (lookup_timeout_ns >= 0);

-- +goose Down
ALTER TABLE orgs
    DROP COLUMN lookup_timeout_ns,
    DROP COLUMN lookup_token,
    DROP COLUMN lookup_url;
