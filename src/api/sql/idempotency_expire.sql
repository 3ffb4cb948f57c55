-- idempotency_expire: removes the keys claimed more than a day ago.
DELETE FROM api_idempotency WHERE created_at < now() - interval '1 day'
