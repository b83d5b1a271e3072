-- An organization's retention: how many days its calls are kept after their last activity
-- (store.Org.RetentionDays); 0 keeps them forever. The sweeper finds due calls through
-- calls_started_idx (a call that last moved before a cutoff also started before it), so no
-- index is added and a write to a call updates no more index entries than before.

-- +goose Up
ALTER TABLE orgs
    ADD COLUMN retention_days integer NOT NULL DEFAULT 0 CHECK (retention_days BETWEEN 0 AND 36500);

-- +goose Down
ALTER TABLE orgs DROP COLUMN retention_days;
