-- audit_list: the newest $1 audit rows, newest first.
SELECT id, at, actor, action, target, outcome, detail FROM audit ORDER BY id DESC LIMIT $1
