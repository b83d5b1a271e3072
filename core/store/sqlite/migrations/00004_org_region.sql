-- An organization's region: the IANA name of its time zone ('' for UTC) and the ISO 3166-1
-- alpha-2 code of its country ('' for none). The application validates both (store.Region).

-- +goose Up
ALTER TABLE orgs ADD COLUMN time_zone TEXT NOT NULL DEFAULT '';
ALTER TABLE orgs ADD COLUMN country TEXT NOT NULL DEFAULT '' CHECK (country = '' OR (length(country) = 2 AND country GLOB '[A-Z][A-Z]'));

-- +goose Down
ALTER TABLE orgs DROP COLUMN country;
ALTER TABLE orgs DROP COLUMN time_zone;
