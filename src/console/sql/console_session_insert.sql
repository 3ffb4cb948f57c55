-- $1 id_hash, $2 service, $3 operator, $4 token_digest, $5 form_token, $6 idle seconds, $7 absolute seconds.
INSERT INTO console_session (id_hash, service, operator, token_digest, form_token, idle_until, expires_at)
VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6), now() + make_interval(secs => $7))
