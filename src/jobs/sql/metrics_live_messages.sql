-- metrics_live_messages: the messages of the runs not yet ended, by outcome so far, and the bytes delivered.
SELECT coalesce(sum((counters->>'staged')::bigint), 0)::bigint AS staged,
       coalesce(sum((counters->>'delivered')::bigint), 0)::bigint AS delivered,
       coalesce(sum((counters->>'delivered_bytes')::bigint), 0)::bigint AS delivered_bytes,
       coalesce(sum((counters->>'dead_lettered')::bigint), 0)::bigint AS dead_lettered,
       coalesce(sum((counters->>'returned')::bigint), 0)::bigint AS returned
FROM transfer_run
WHERE state IN ('queued', 'running', 'waiting', 'returning')
