-- A call's history row: the columns the call list filters and sorts on, kept up to date as
-- events are written (store.Summary says how each merges), and the indexes its reads use
-- (docs/history.md shows their plans), as PostgreSQL's store has them (its migration 00008):
--
--   calls_started_idx  the list, newest first: (org_id, first_at, call_no), walked backwards;
--   calls_id_idx       a call by the id the API gives it (store.CallID of its key);
--   calls_from_idx,
--   calls_to_idx       a number search: from_key and to_key are the numbers' digits last first
--                      (store.NumberKey), so a whole number or its trailing digits is a prefix.
--
-- Rows on file are filled in from their events and blocks once. A stored number is E.164, at
-- most 15 digits after its '+', which the key's expression below reverses.

-- +goose Up
ALTER TABLE calls ADD COLUMN answered_at TEXT;
ALTER TABLE calls ADD COLUMN answered_by TEXT NOT NULL DEFAULT '';
ALTER TABLE calls ADD COLUMN ended_at TEXT;
ALTER TABLE calls ADD COLUMN flags INTEGER NOT NULL DEFAULT 0;
ALTER TABLE calls ADD COLUMN from_key TEXT NOT NULL DEFAULT '';
ALTER TABLE calls ADD COLUMN to_key TEXT NOT NULL DEFAULT '';
ALTER TABLE calls ADD COLUMN from_ext TEXT NOT NULL DEFAULT '';
ALTER TABLE calls ADD COLUMN to_ext TEXT NOT NULL DEFAULT '';
ALTER TABLE calls ADD COLUMN locations TEXT;

UPDATE calls SET
    from_key = substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 15, 1) || substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 14, 1) || substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 13, 1) || substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 12, 1) || substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 11, 1) || substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 10, 1) || substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 9, 1) || substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 8, 1) || substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 7, 1) || substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 6, 1) || substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 5, 1) || substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 4, 1) || substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 3, 1) || substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 2, 1) || substr(replace(coalesce(json_extract(block, '$.from.number'), ''), '+', ''), 1, 1),
    to_key = substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 15, 1) || substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 14, 1) || substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 13, 1) || substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 12, 1) || substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 11, 1) || substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 10, 1) || substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 9, 1) || substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 8, 1) || substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 7, 1) || substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 6, 1) || substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 5, 1) || substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 4, 1) || substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 3, 1) || substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 2, 1) || substr(replace(coalesce(json_extract(block, '$.to.number'), ''), '+', ''), 1, 1),
    from_ext = coalesce(json_extract(block, '$.from.extension'), ''),
    to_ext = coalesce(json_extract(block, '$.to.extension'), ''),
    answered_at = (SELECT min(e.order_at) FROM call_events e
        WHERE e.org_id = calls.org_id AND e.call_no = calls.call_no AND e.type = 'call_answered'),
    answered_by = coalesce((SELECT json_extract(e.body, '$.answeredBy') FROM call_events e
        WHERE e.org_id = calls.org_id AND e.call_no = calls.call_no AND e.type = 'call_answered'
        ORDER BY e.order_at LIMIT 1), ''),
    ended_at = (SELECT min(e.order_at) FROM call_events e
        WHERE e.org_id = calls.org_id AND e.call_no = calls.call_no AND e.type IN ('call_ended', 'call_missed')),
    flags = coalesce((SELECT
            max(CASE WHEN e.type = 'call_answered' OR (e.type = 'call_ended' AND (
                json_extract(e.body, '$.disposition') = 'answered' OR json_extract(e.body, '$.talkTime') > 0
                OR json_extract(e.body, '$.answeredElsewhere') = 1)) THEN 1 ELSE 0 END)
          | max(CASE WHEN e.type = 'call_ended' AND json_extract(e.body, '$.disposition') = 'voicemail' THEN 2 ELSE 0 END)
          | max(CASE WHEN e.type = 'call_recorded' THEN 4 ELSE 0 END)
          | max(CASE WHEN e.type = 'call_transcribed' THEN 8 ELSE 0 END)
        FROM call_events e WHERE e.org_id = calls.org_id AND e.call_no = calls.call_no), 0),
    locations = (SELECT coalesce(json_extract(e.body, '$.locations'), '["main"]') FROM call_events e
        WHERE e.org_id = calls.org_id AND e.call_no = calls.call_no
        ORDER BY e.sequence DESC, e.order_at DESC LIMIT 1);

CREATE INDEX calls_started_idx ON calls (org_id, first_at, call_no);
CREATE INDEX calls_id_idx ON calls (org_id, call_id);
CREATE INDEX calls_from_idx ON calls (org_id, from_key);
CREATE INDEX calls_to_idx ON calls (org_id, to_key);

-- +goose Down
DROP INDEX calls_to_idx;
DROP INDEX calls_from_idx;
DROP INDEX calls_id_idx;
DROP INDEX calls_started_idx;
ALTER TABLE calls DROP COLUMN locations;
ALTER TABLE calls DROP COLUMN to_ext;
ALTER TABLE calls DROP COLUMN from_ext;
ALTER TABLE calls DROP COLUMN to_key;
ALTER TABLE calls DROP COLUMN from_key;
ALTER TABLE calls DROP COLUMN flags;
ALTER TABLE calls DROP COLUMN ended_at;
ALTER TABLE calls DROP COLUMN answered_by;
ALTER TABLE calls DROP COLUMN answered_at;
