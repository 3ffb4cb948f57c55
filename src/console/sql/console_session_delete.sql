-- $1 id_hash: sign-out (or a session whose token is no longer in force).
DELETE FROM console_session WHERE id_hash = $1
