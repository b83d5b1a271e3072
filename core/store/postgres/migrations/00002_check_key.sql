-- callwire_check_key is the guard a KeyCheck runs inside the transaction of the work it guards:
-- it raises SQLSTATE CWK01 unless a live key has that client ID and secret hash. It runs with the
-- caller's privileges and search_path (the schema the store works in).

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION callwire_check_key(p_client_id text, p_secret_hash bytea, p_at timestamptz)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM api_keys
        WHERE client_id = p_client_id AND secret_hash = p_secret_hash
          AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > p_at)
    ) THEN
        RAISE EXCEPTION 'key rejected' USING ERRCODE = 'CWK01';
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION callwire_check_key(text, bytea, timestamptz);
