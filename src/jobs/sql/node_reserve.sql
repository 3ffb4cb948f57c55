-- node_reserve: takes $2 tokens from node $1's bucket now, in turn (sql/functions/node_budget.sql); the seconds
-- until the bucket would have held them (0 when they were there).
SELECT transfer_node_reserve($1, $2)
