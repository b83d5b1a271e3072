-- The to-call-back list finds a number's calls through the indexes the call history has anyway
-- (calls_from_idx and calls_to_idx, by the number's digits), and only a party the reporter could
-- not parse, listed by its text and without digits to key it, through an index of its own:
--
--   calls_cb_text_idx  the calls that count toward such a text (their party's key is ''),
--                      replacing calls_cb_idx, which held every call with an outside number
--                      and so cost every new call one more entry at a random place;
--   calls.cb_moved_from the number the call counted toward before the update that moved it to
--                      another (its block moved, and with it the party the call counts
--                      toward): every update sets it (NULL when the call did not move), and only
--                      that update's RETURNING reads it, for the upkeep to recompute that
--                      number's item. It is in no index.

-- +goose Up
ALTER TABLE calls ADD COLUMN cb_moved_from TEXT;
DROP INDEX calls_cb_idx;
CREATE INDEX calls_cb_text_idx ON calls (org_id, cb_number)
    WHERE cb_number IS NOT NULL AND CASE WHEN direction = 'inbound' THEN from_key ELSE to_key END = '';

-- +goose Down
DROP INDEX calls_cb_text_idx;
CREATE INDEX calls_cb_idx ON calls (org_id, cb_number) WHERE cb_number IS NOT NULL;
ALTER TABLE calls DROP COLUMN cb_moved_from;
