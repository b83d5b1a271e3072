-- Events are keyed to their call by the call's number (call_no), which counts calls in the order
-- they are created, instead of by the call's id. A call's id is derived from its key, so it falls
-- at a random place in any index that starts with it: keyed on (org_id, call_id, dedupe_key), a
-- new call's events went to a random page of the events' largest index, and once that index
-- outgrew PostgreSQL's buffers every new call cost a page read and, after each checkpoint, a
-- full-page image in the WAL. Keyed on the call's number, the calls being written now are the
-- index's last pages, whatever the size of the store.
--
-- call_id stays on each event, as written; the number is only the key. Numbers have gaps (an
-- upsert that finds its call on file still draws one) and mean nothing outside the store.

-- +goose Up
ALTER TABLE calls ADD COLUMN call_no bigint GENERATED ALWAYS AS IDENTITY;
ALTER TABLE calls ADD CONSTRAINT calls_call_no_key UNIQUE (org_id, call_no);

ALTER TABLE call_events ADD COLUMN call_no bigint;
UPDATE call_events e SET call_no = c.call_no FROM calls c WHERE c.org_id = e.org_id AND c.id = e.call_id;
ALTER TABLE call_events ALTER COLUMN call_no SET NOT NULL;
ALTER TABLE call_events DROP CONSTRAINT call_events_org_id_call_id_fkey;
ALTER TABLE call_events DROP CONSTRAINT call_events_org_id_call_id_dedupe_key_key;
ALTER TABLE call_events ADD CONSTRAINT call_events_call_no_dedupe_key_key UNIQUE (org_id, call_no, dedupe_key);
ALTER TABLE call_events ADD CONSTRAINT call_events_call_no_fkey
    FOREIGN KEY (org_id, call_no) REFERENCES calls (org_id, call_no);

-- +goose Down
ALTER TABLE call_events DROP CONSTRAINT call_events_call_no_fkey;
ALTER TABLE call_events DROP CONSTRAINT call_events_call_no_dedupe_key_key;
ALTER TABLE call_events ADD CONSTRAINT call_events_org_id_call_id_dedupe_key_key UNIQUE (org_id, call_id, dedupe_key);
ALTER TABLE call_events ADD CONSTRAINT call_events_org_id_call_id_fkey
    FOREIGN KEY (org_id, call_id) REFERENCES calls (org_id, id);
ALTER TABLE call_events DROP COLUMN call_no;
ALTER TABLE calls DROP CONSTRAINT calls_call_no_key;
ALTER TABLE calls DROP COLUMN call_no;
