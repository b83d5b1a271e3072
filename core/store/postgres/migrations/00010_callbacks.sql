-- The to-call-back list (docs/history.md, "To call back"):
--
--   calls.cb_number     the outside number a call counts toward (store.Summary.Callback: an
--                       inbound call's caller, an outbound or internal call's callee); NULL for
--                       none (withheld, an extension). It moves with the call's block.
--   calls.cb_moved_from the number the call counted toward before the upsert that moved it to
--                       another: every upsert sets it (NULL when the call did not move) and
--                       only that upsert's RETURNING reads it.
--   calls_cb_text_idx   the calls that count toward the text of a party the reporter could not
--                       parse (its key in from_key or to_key is ''). A recompute finds the
--                       calls of a number with digits through calls_from_idx and calls_to_idx,
--                       which the call history has anyway, so a call adds no index entry of its
--                       own for the list.
--   callbacks           one row per outside number that has had a call that misses or settles:
--                       its item (store.CallbackOf) when it has one (open NOT NULL), else only a
--                       row to lock. Each write that may change a number's item locks its row
--                       in the write's statement, so that of two writers of one number the
--                       second sees what the first wrote; pending marks an item that a write
--                       must recompute, until the recompute that follows the write clears it.
--   callbacks_list_idx  the list, newest miss first, open and closed apart.
--   callback_dismissals the dismissals, facts CallbackOf reads.
--   orgs.callback_needs_answer the organization's setting.
--
-- Every key includes org_id. Calls on file are not counted toward the list: it starts with the
-- calls written after this migration.

-- +goose Up
ALTER TABLE calls
    ADD COLUMN cb_number     text COLLATE "C",
    ADD COLUMN cb_moved_from text COLLATE "C";
CREATE INDEX calls_cb_text_idx ON calls (org_id, cb_number)
    WHERE cb_number IS NOT NULL AND CASE WHEN direction = 'inbound' THEN from_key ELSE to_key END = '';

ALTER TABLE orgs ADD COLUMN callback_needs_answer boolean NOT NULL DEFAULT false;

CREATE TABLE callbacks (
    org_id          text        COLLATE "C" NOT NULL REFERENCES orgs (org_id),
    number          text        COLLATE "C" NOT NULL,
    pending         boolean     NOT NULL DEFAULT false,
    open            boolean,
    name            text        NOT NULL DEFAULT '',
    missed_count    integer     NOT NULL DEFAULT 0,
    first_missed_at timestamptz,
    last_missed_at  timestamptz,
    last_call_id    text        NOT NULL DEFAULT '',
    locations       text[]      NOT NULL DEFAULT '{}',
    voicemail       boolean     NOT NULL DEFAULT false,
    closed_at       timestamptz,
    closed_reason   text        NOT NULL DEFAULT '',
    closed_call_id  text        NOT NULL DEFAULT '',
    closed_ext      text        NOT NULL DEFAULT '',
    PRIMARY KEY (org_id, number)
);
CREATE INDEX callbacks_list_idx ON callbacks (org_id, open, last_missed_at, number) WHERE open IS NOT NULL;

CREATE TABLE callback_dismissals (
    org_id    text        COLLATE "C" NOT NULL REFERENCES orgs (org_id),
    number    text        COLLATE "C" NOT NULL,
    at        timestamptz NOT NULL,
    extension text        NOT NULL
);
CREATE INDEX callback_dismissals_idx ON callback_dismissals (org_id, number, at);

-- +goose Down
DROP TABLE callback_dismissals;
DROP TABLE callbacks;
ALTER TABLE orgs DROP COLUMN callback_needs_answer;
DROP INDEX calls_cb_text_idx;
ALTER TABLE calls DROP COLUMN cb_moved_from, DROP COLUMN cb_number;
