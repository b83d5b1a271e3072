-- A call is found by its id, and its key has no index of its own.
--
-- A call's id is CallID of its key (store.CallID: the SHA-256 of the organization, provider and
-- provider call ID), as every release has written it, so the id names the key: finding a call by
-- its key is finding it by CallID of that key (and checking the key, which the row carries).
-- Until now a call was indexed twice at random places: by its key (the table's UNIQUE constraint,
-- which the writes looked calls up by) and by its id (calls_id_idx, which the history reads by).
-- Each new call changed a page at a random place of both; once the file outgrew the writer's page
-- cache, each such page cost a read and a frame in the WAL. Now one unique index of the id serves
-- both, and a write's lookup reads the page its insert then changes.
--
-- Distinct keys have distinct ids (a collision of SHA-256 is not expected to happen); were two to
-- collide, the second call's insert would fail on this index rather than be filed as the first.
--
-- SQLite cannot drop a table's UNIQUE constraint in place: the table is rebuilt, keeping every
-- row's call_no (the rowid, which events refer to) and every column, and its other indexes are
-- created again. On a store of millions of calls that takes minutes, under the migration's lock.
-- SQLite's procedure for changing a table asks for foreign keys off while the old table is
-- dropped and the new one renamed in its place (with them on, the drop deletes the old table's
-- rows first, which the events referring to them forbid): the store turns them off while its
-- migrations run (Migrate), and the migration checks every reference to the calls before it
-- commits, so a rebuild that lost a call changes nothing.

-- +goose Up
CREATE TABLE calls_v9 (
    call_no          INTEGER PRIMARY KEY,
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
    answered_at      TEXT,
    answered_by      TEXT NOT NULL DEFAULT '',
    ended_at         TEXT,
    flags            INTEGER NOT NULL DEFAULT 0,
    from_key         TEXT NOT NULL DEFAULT '',
    to_key           TEXT NOT NULL DEFAULT '',
    from_ext         TEXT NOT NULL DEFAULT '',
    to_ext           TEXT NOT NULL DEFAULT '',
    locations        TEXT,
    cb_number        TEXT,
    cb_moved_from    TEXT,
    UNIQUE (org_id, call_no)
) STRICT;

INSERT INTO calls_v9 (call_no, org_id, call_id, provider, provider_call_id, direction, state, block,
    block_seq, block_at, first_at, last_at, clients, created_at, updated_at, answered_at, answered_by,
    ended_at, flags, from_key, to_key, from_ext, to_ext, locations, cb_number, cb_moved_from)
SELECT call_no, org_id, call_id, provider, provider_call_id, direction, state, block,
    block_seq, block_at, first_at, last_at, clients, created_at, updated_at, answered_at, answered_by,
    ended_at, flags, from_key, to_key, from_ext, to_ext, locations, cb_number, cb_moved_from
FROM calls ORDER BY call_no;

DROP TABLE calls;
ALTER TABLE calls_v9 RENAME TO calls;

CREATE UNIQUE INDEX calls_id_key ON calls (org_id, call_id);
CREATE INDEX calls_started_idx ON calls (org_id, first_at, call_no);
CREATE INDEX calls_from_idx ON calls (org_id, from_key);
CREATE INDEX calls_to_idx ON calls (org_id, to_key);
CREATE INDEX calls_cb_text_idx ON calls (org_id, cb_number)
    WHERE cb_number IS NOT NULL AND CASE WHEN direction = 'inbound' THEN from_key ELSE to_key END = '';

-- Every event's call is on file, or the migration fails and changes nothing.
CREATE TEMP TABLE calls_v9_check (broken INTEGER NOT NULL CHECK (broken = 0));
INSERT INTO calls_v9_check SELECT count(*) FROM pragma_foreign_key_check('call_events');
DROP TABLE calls_v9_check;

-- +goose Down
CREATE TABLE calls_v8 (
    call_no          INTEGER PRIMARY KEY,
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
    answered_at      TEXT,
    answered_by      TEXT NOT NULL DEFAULT '',
    ended_at         TEXT,
    flags            INTEGER NOT NULL DEFAULT 0,
    from_key         TEXT NOT NULL DEFAULT '',
    to_key           TEXT NOT NULL DEFAULT '',
    from_ext         TEXT NOT NULL DEFAULT '',
    to_ext           TEXT NOT NULL DEFAULT '',
    locations        TEXT,
    cb_number        TEXT,
    cb_moved_from    TEXT,
    UNIQUE (org_id, provider, provider_call_id),
    UNIQUE (org_id, call_no)
) STRICT;

INSERT INTO calls_v8 (call_no, org_id, call_id, provider, provider_call_id, direction, state, block,
    block_seq, block_at, first_at, last_at, clients, created_at, updated_at, answered_at, answered_by,
    ended_at, flags, from_key, to_key, from_ext, to_ext, locations, cb_number, cb_moved_from)
SELECT call_no, org_id, call_id, provider, provider_call_id, direction, state, block,
    block_seq, block_at, first_at, last_at, clients, created_at, updated_at, answered_at, answered_by,
    ended_at, flags, from_key, to_key, from_ext, to_ext, locations, cb_number, cb_moved_from
FROM calls ORDER BY call_no;

DROP TABLE calls;
ALTER TABLE calls_v8 RENAME TO calls;

CREATE INDEX calls_started_idx ON calls (org_id, first_at, call_no);
CREATE INDEX calls_id_idx ON calls (org_id, call_id);
CREATE INDEX calls_from_idx ON calls (org_id, from_key);
CREATE INDEX calls_to_idx ON calls (org_id, to_key);
CREATE INDEX calls_cb_text_idx ON calls (org_id, cb_number)
    WHERE cb_number IS NOT NULL AND CASE WHEN direction = 'inbound' THEN from_key ELSE to_key END = '';

-- Every event's call is on file, or the migration fails and changes nothing.
CREATE TEMP TABLE calls_v8_check (broken INTEGER NOT NULL CHECK (broken = 0));
INSERT INTO calls_v8_check SELECT count(*) FROM pragma_foreign_key_check('call_events');
DROP TABLE calls_v8_check;
