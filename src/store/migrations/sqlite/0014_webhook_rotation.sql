-- Admin webhooks: a rotated secret keeps co-signing until `previous_until` (sealed under the
-- master key like `sealed_secret`; NULL when there is no overlap), and why an endpoint was
-- disabled (`disabled_reason`: the dead streak, or the admin who disabled it).
ALTER TABLE webhooks ADD COLUMN previous_sealed_secret TEXT;
ALTER TABLE webhooks ADD COLUMN previous_until BIGINT;
ALTER TABLE outbox_endpoints ADD COLUMN disabled_reason TEXT;
-- Every endpoint disabled so far was disabled by its dead streak.
UPDATE outbox_endpoints SET disabled_reason = CAST(dead_streak AS TEXT) || ' consecutive dead deliveries'
    WHERE disabled_at IS NOT NULL;
