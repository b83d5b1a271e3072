-- The to-call-back upkeep reads, from each call's upsert, whether the write moved the call to
-- another number (its block moved, and with it the party the call counts toward): the number it
-- moved from is that number's item to recompute. cb_moved_from carries it out of the statement:
-- every update sets it (NULL when the call did not move), and only that update's RETURNING
-- reads it. The column is in no index, so setting it costs a write nothing more.

-- +goose Up
ALTER TABLE calls ADD COLUMN cb_moved_from TEXT;

-- +goose Down
ALTER TABLE calls DROP COLUMN cb_moved_from;
