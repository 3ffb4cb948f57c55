-- $1 id_hash, $2 idle seconds: the session if it has not expired, its idle expiry moved on (never past its absolute
-- expiry).
UPDATE console_session
SET idle_until = least(now() + make_interval(secs => $2), expires_at)
WHERE id_hash = $1 AND idle_until > now() AND expires_at > now()
RETURNING service, operator, token_digest, form_token
