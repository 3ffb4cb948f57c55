-- node_reserve_ahead: takes $2 tokens from node $1's bucket now, in turn, and up to $3 seconds' worth of spare tokens
-- it holds beyond them (sql/functions/node_budget.sql); the seconds until the bucket would have held the $2, and how
-- many spare tokens were taken.
SELECT wait, spare FROM transfer_node_reserve_ahead($1, $2, $3)
