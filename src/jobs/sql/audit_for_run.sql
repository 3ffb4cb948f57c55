-- audit_for_run: every audit row about run $1 (target 'run:<id>'), oldest first.
SELECT id, at, actor, action, target, outcome, detail FROM audit WHERE target = 'run:' || $1::text ORDER BY id
