-- An organization's region: the IANA name of its time zone ('' for UTC) and the ISO 3166-1
-- alpha-2 code of its country ('' for none). The application validates both (store.Region).

-- +goose Up
ALTER TABLE orgs
    ADD COLUMN time_zone text NOT NULL DEFAULT '',
    ADD COLUMN country   text NOT NULL DEFAULT '' CHECK (country = '' OR country ~ '^[A-Z]{2}$');

-- +goose Down
ALTER TABLE orgs
    DROP COLUMN country,
    DROP COLUMN time_zone;
