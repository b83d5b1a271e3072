-- The to-call-back list (docs/history.md, "To call back"):
--
--   calls.cb_number   the outside number a call counts toward: an inbound call's caller, an
--                     outbound or internal call's callee (store.CallbackNumber of that party of
--                     the stored block); NULL when there is none (withheld, an extension);
--   calls_cb_idx      a number's calls, read when a write touches the number;
--   callbacks         one row per number that ever had a miss: its item (store.CallbackOf),
--                     rewritten in each write that touches the number;
--   callbacks_list_idx  the list, newest miss first, open and closed apart;
--   callback_dismissals the dismissals, facts CallbackOf reads;
--   orgs.callback_needs_answer  the organization's setting.
--
-- Calls on file are not counted toward the list: it starts with the calls written after this
-- migration.

-- +goose Up
ALTER TABLE calls ADD COLUMN cb_number TEXT;
CREATE INDEX calls_cb_idx ON calls (org_id, cb_number) WHERE cb_number IS NOT NULL;

ALTER TABLE orgs ADD COLUMN callback_needs_answer INTEGER NOT NULL DEFAULT 0;

CREATE TABLE callbacks (
    org_id          TEXT NOT NULL REFERENCES orgs (org_id),
    number          TEXT NOT NULL,
    name            TEXT NOT NULL,
    open            INTEGER NOT NULL,
    missed_count    INTEGER NOT NULL,
    first_missed_at TEXT NOT NULL,
    last_missed_at  TEXT NOT NULL,
    last_call_id    TEXT NOT NULL,
    locations       TEXT NOT NULL,
    voicemail       INTEGER NOT NULL,
    closed_at       TEXT,
    closed_reason   TEXT NOT NULL,
    closed_call_id  TEXT NOT NULL,
    closed_ext      TEXT NOT NULL,
    PRIMARY KEY (org_id, number)
) STRICT;

CREATE INDEX callbacks_list_idx ON callbacks (org_id, open, last_missed_at, number);

CREATE TABLE callback_dismissals (
    org_id    TEXT NOT NULL REFERENCES orgs (org_id),
    number    TEXT NOT NULL,
    at        TEXT NOT NULL,
    extension TEXT NOT NULL
) STRICT;

CREATE INDEX callback_dismissals_idx ON callback_dismissals (org_id, number, at);

-- +goose Down
DROP TABLE callback_dismissals;
DROP TABLE callbacks;
ALTER TABLE orgs DROP COLUMN callback_needs_answer;
DROP INDEX calls_cb_idx;
ALTER TABLE calls DROP COLUMN cb_number;
