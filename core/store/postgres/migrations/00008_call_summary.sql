-- A call's history row: the columns the call list filters and sorts on, kept up to date by the
-- call's upsert as events are written (store.Summary says how each merges), and the indexes its
-- reads use (docs/history.md shows their plans):
--
--   calls_started_idx  the list, newest first: (org_id, first_at, call_no), walked backwards;
--   calls_id_idx       a call by the id the API gives it (store.CallID of its key);
--   calls_from_idx,
--   calls_to_idx       a number search: from_key and to_key are the numbers' digits last first
--                      (store.NumberKey), so a whole number or its trailing digits is a prefix.
--
-- Each index costs a new call one more index entry; the id's falls at a random page, the list's
-- at the end of its index. Rows on file are filled in from their events and blocks once.

-- +goose Up
ALTER TABLE calls
    ADD COLUMN answered_at timestamptz,
    ADD COLUMN answered_by text             NOT NULL DEFAULT '',
    ADD COLUMN ended_at    timestamptz,
    ADD COLUMN flags       smallint         NOT NULL DEFAULT 0,
    ADD COLUMN from_key    text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN to_key      text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN from_ext    text             NOT NULL DEFAULT '',
    ADD COLUMN to_ext      text             NOT NULL DEFAULT '',
    ADD COLUMN locations   json;

UPDATE calls c SET
    from_key = COALESCE(reverse(regexp_replace(c.block -> 'from' ->> 'number', '[^0-9]', '', 'g')), ''),
    to_key = COALESCE(reverse(regexp_replace(c.block -> 'to' ->> 'number', '[^0-9]', '', 'g')), ''),
    from_ext = COALESCE(c.block -> 'from' ->> 'extension', ''),
    to_ext = COALESCE(c.block -> 'to' ->> 'extension', ''),
    answered_at = s.answered_at,
    answered_by = COALESCE(s.answered_by, ''),
    ended_at = s.ended_at,
    flags = s.flags,
    locations = s.locations
FROM (
    SELECT e.org_id, e.call_no,
        min(e.order_at) FILTER (WHERE e.type = 'call_answered') AS answered_at,
        (array_agg(e.body ->> 'answeredBy' ORDER BY e.order_at) FILTER (WHERE e.type = 'call_answered'))[1] AS answered_by,
        min(e.order_at) FILTER (WHERE e.type IN ('call_ended', 'call_missed')) AS ended_at,
        (CASE WHEN bool_or(e.type = 'call_answered' OR (e.type = 'call_ended' AND (
                e.body ->> 'disposition' = 'answered' OR (e.body ->> 'talkTime')::float8 > 0
                OR (e.body ->> 'answeredElsewhere')::boolean))) THEN 1 ELSE 0 END
          | CASE WHEN bool_or(e.type = 'call_ended' AND e.body ->> 'disposition' = 'voicemail') THEN 2 ELSE 0 END
          | CASE WHEN bool_or(e.type = 'call_recorded') THEN 4 ELSE 0 END
          | CASE WHEN bool_or(e.type = 'call_transcribed') THEN 8 ELSE 0 END)::smallint AS flags,
        (array_agg(COALESCE(e.body -> 'locations', '["main"]'::json) ORDER BY e.sequence DESC, e.order_at DESC))[1] AS locations
    FROM call_events e
    GROUP BY e.org_id, e.call_no
) s
WHERE s.org_id = c.org_id AND s.call_no = c.call_no;

CREATE INDEX calls_started_idx ON calls (org_id, first_at, call_no);
CREATE INDEX calls_id_idx ON calls (org_id, id);
CREATE INDEX calls_from_idx ON calls (org_id, from_key);
CREATE INDEX calls_to_idx ON calls (org_id, to_key);

-- +goose Down
DROP INDEX calls_to_idx;
DROP INDEX calls_from_idx;
DROP INDEX calls_id_idx;
DROP INDEX calls_started_idx;
ALTER TABLE calls
    DROP COLUMN locations,
    DROP COLUMN to_ext,
    DROP COLUMN from_ext,
    DROP COLUMN to_key,
    DROP COLUMN from_key,
    DROP COLUMN flags,
    DROP COLUMN ended_at,
    DROP COLUMN answered_by,
    DROP COLUMN answered_at;
