-- Calls are numbered in the order they are created (call_no, the table's rowid), found by their
-- key (org_id, provider, provider_call_id), and events are keyed to their call by its number.
--
-- A call's id is the SHA-256 of its key (store.CallID), so it falls at a random place in any
-- index that starts with it. Before, two indexes did: the calls' primary key (org_id, call_id)
-- and the events' unique key (org_id, call_id, dedupe_key). Each new call changed a page at a
-- random place of each, besides the one of the key's index; once the file outgrew the page
-- cache's share of it, every new call cost a page read and a page written to the WAL per index.
-- Now a new call changes one random page (the key's), and its events go at the end of their
-- index, whatever the size of the store. PostgreSQL's store made the same change (its
-- migrations 00004 and 00005).
--
-- An event refers to its call by (org_id, call_no), which its unique key begins with, so that
-- SQLite checks the reference through that index: created in the order of their numbers, the
-- calls' entries in (org_id, call_no) go at the end of that index too.
--
-- call_id stays on both tables, as written; the number is only the key. The tables are rebuilt
-- (SQLite cannot change a table's keys in place): on a store of millions of calls that takes
-- minutes, under the migration's lock. The old rowids become the calls' numbers.

-- +goose Up
CREATE TABLE calls_v3 (
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
    UNIQUE (org_id, provider, provider_call_id),
    UNIQUE (org_id, call_no)
) STRICT;

INSERT INTO calls_v3 (call_no, org_id, call_id, provider, provider_call_id, direction, state, block, block_seq,
    block_at, first_at, last_at, clients, created_at, updated_at)
SELECT rowid, org_id, call_id, provider, provider_call_id, direction, state, block, block_seq,
    block_at, first_at, last_at, clients, created_at, updated_at
FROM calls ORDER BY rowid;

CREATE TABLE call_events_v3 (
    org_id            TEXT NOT NULL,
    event_id          TEXT NOT NULL,
    call_no           INTEGER NOT NULL,
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
    UNIQUE (org_id, call_no, dedupe_key),
    FOREIGN KEY (org_id, call_no) REFERENCES calls_v3 (org_id, call_no)
) STRICT;

INSERT INTO call_events_v3 (org_id, event_id, call_no, call_id, type, dedupe_key, sequence, provider_event_id,
    occurred_at, order_at, received_at, body)
SELECT e.org_id, e.event_id, c.rowid, e.call_id, e.type, e.dedupe_key, e.sequence, e.provider_event_id,
    e.occurred_at, e.order_at, e.received_at, e.body
FROM call_events e JOIN calls c ON c.org_id = e.org_id AND c.call_id = e.call_id
ORDER BY e.rowid;

DROP TABLE call_events;
DROP TABLE calls;
ALTER TABLE calls_v3 RENAME TO calls;
ALTER TABLE call_events_v3 RENAME TO call_events;

-- +goose Down
CREATE TABLE calls_v2 (
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

INSERT INTO calls_v2 (rowid, org_id, call_id, provider, provider_call_id, direction, state, block, block_seq,
    block_at, first_at, last_at, clients, created_at, updated_at)
SELECT call_no, org_id, call_id, provider, provider_call_id, direction, state, block, block_seq,
    block_at, first_at, last_at, clients, created_at, updated_at
FROM calls ORDER BY call_no;

CREATE TABLE call_events_v2 (
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
    FOREIGN KEY (org_id, call_id) REFERENCES calls_v2 (org_id, call_id)
) STRICT;

INSERT INTO call_events_v2 (rowid, org_id, event_id, call_id, type, dedupe_key, sequence, provider_event_id,
    occurred_at, order_at, received_at, body)
SELECT rowid, org_id, event_id, call_id, type, dedupe_key, sequence, provider_event_id,
    occurred_at, order_at, received_at, body
FROM call_events ORDER BY rowid;

DROP TABLE call_events;
DROP TABLE calls;
ALTER TABLE calls_v2 RENAME TO calls;
ALTER TABLE call_events_v2 RENAME TO call_events;
