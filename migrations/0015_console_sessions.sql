-- The operator console's sessions (issue 30, ADR 0014): an API token exchanged on the sign-in page for a session
-- held here. The browser keeps only the session id, in an HttpOnly cookie; this table keeps its SHA-256, so a read
-- of the table cannot be replayed as a cookie. A session ends at the first of: its idle expiry (moved on by each
-- request), its absolute expiry (fixed at sign-in), sign-out (the row is deleted), the removal of the token it was
-- made with (token_digest no longer among the tokens in force: checked on every request). Expired rows are deleted
-- by the next sign-in.
CREATE TABLE console_session (
    -- sha256 of the session id the cookie carries.
    id_hash       bytea       PRIMARY KEY,
    -- The service whose token signed in, and the operator it acts for: whose grants decide, whom the audit names.
    service       text        NOT NULL,
    operator      text        NOT NULL,
    -- sha256 of the token used to sign in (the form the service's tokens are held in).
    token_digest  bytea       NOT NULL,
    -- The per-session form token every console POST must echo (CSRF).
    form_token    text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    idle_until    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    CONSTRAINT console_session_operator_not_empty CHECK (operator <> ''),
    CONSTRAINT console_session_idle_within_absolute CHECK (idle_until <= expires_at)
);

CREATE INDEX console_session_by_expiry ON console_session (expires_at);
