-- run_stored_preview: run $1's stored preview — its plan, plan hash, the preview (findings, size, notes) and its
-- expiry, as the preview wrote them; no row when there is no such run or it was stored without a preview.
SELECT plan, plan_hash, preview, preview_expires_at AS expires_at
FROM transfer_run
WHERE id = $1 AND plan IS NOT NULL AND plan_hash IS NOT NULL AND preview IS NOT NULL
