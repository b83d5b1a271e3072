-- A call is found by its key (org_id, provider, provider_call_id), which is now its primary key.
-- The index of its id goes: the id is the SHA-256 of the key (store.CallID), so distinct keys
-- have distinct ids by construction, and nothing looks a call up by its id. Both keys fell at a
-- random page of their index, so each new call cost a page in each; on a store that outgrows
-- PostgreSQL's buffers, that was a page read and, after each checkpoint, a full-page image in
-- the WAL for each. Keyed once, a new call costs one.
--
-- The new primary key is built from the table once (the unique constraint it replaces cannot be
-- promoted in place); on a store of millions of calls that takes seconds, under the migration's
-- lock.

-- +goose Up
ALTER TABLE calls
    DROP CONSTRAINT calls_pkey,
    DROP CONSTRAINT calls_org_id_provider_provider_call_id_key,
    ADD PRIMARY KEY (org_id, provider, provider_call_id);

-- +goose Down
ALTER TABLE calls
    DROP CONSTRAINT calls_pkey,
    ADD PRIMARY KEY (org_id, id),
    ADD CONSTRAINT calls_org_id_provider_provider_call_id_key UNIQUE (org_id, provider, provider_call_id);
