-- An organization's caller lookup: the URL of its client system's adapter ('' for none), the
-- bearer token sent to it ('' for none; kept as given because callwire must present it), and the
-- timeout of one request in nanoseconds (0 for the server's default).

-- +goose Up
ALTER TABLE orgs ADD COLUMN lookup_url TEXT NOT NULL DEFAULT '';
ALTER TABLE orgs ADD COLUMN lookup_token TEXT NOT NULL DEFAULT '';
ALTER TABLE orgs ADD COLUMN lookup_timeout_ns INTEGER NOT NULL DEFAULT 0 CHECK (lookup_timeout_ns >= 0);

-- +goose Down
ALTER TABLE orgs DROP COLUMN lookup_timeout_ns;
ALTER TABLE orgs DROP COLUMN lookup_token;
ALTER TABLE orgs DROP COLUMN lookup_url;
