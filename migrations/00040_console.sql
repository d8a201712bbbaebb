-- The operator console: its sign-in sessions, and the indexes its look-ups
-- need (holds by order reference, SKUs by prefix).

-- +goose Up
-- A console session, made by signing in with an ops API key. The cookie
-- holds a random token; only its SHA-256 is stored, as for API keys. Rows
-- live in the database so a session survives a restart and works on every
-- instance; signing out deletes the row, and revoking the key ends it.
CREATE TABLE ops_sessions (
    token_sha256  bytea       PRIMARY KEY,
    api_key_id    bigint      NOT NULL REFERENCES api_keys (id),
    -- Every console form carries this token; a post without it is refused.
    csrf_token    text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL
);

COMMENT ON TABLE ops_sessions IS 'Operator console sessions: SHA-256 of the cookie token, the ops key it acts as, its CSRF token.';

CREATE INDEX ops_sessions_expires_at ON ops_sessions (expires_at);

-- An operator finds a hold by the shop's order reference.
CREATE INDEX reservations_order_ref ON reservations (order_ref) WHERE order_ref IS NOT NULL;

-- SKU search by prefix (LIKE 'abc%'), whatever the database's collation.
CREATE INDEX stock_sku_prefix ON stock (sku text_pattern_ops);

-- +goose Down
DROP INDEX stock_sku_prefix;
DROP INDEX reservations_order_ref;
DROP TABLE ops_sessions;
