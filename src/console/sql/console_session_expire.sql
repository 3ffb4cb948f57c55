-- No arguments: sessions past either expiry are gone.
DELETE FROM console_session WHERE idle_until <= now() OR expires_at <= now()
