-- tx_idle_timeout: bounds how long this transaction may sit idle to $1 milliseconds (a text), so a handler that
-- hangs mid-transaction cannot hold its row locks past its lease.
SELECT set_config('idle_in_transaction_session_timeout', $1, true)
