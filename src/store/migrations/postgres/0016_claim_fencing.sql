-- Fencing tokens on claims: each thread counts the holders its claim has had (`claim_fence`, the
-- last token issued), and a claim carries the token it was given. A new holder (a first claim, a
-- claim after a release or a reply, a takeover after expiry) gets the counter + 1; the same session
-- claiming again keeps its token. A claim held when this runs is given token 1.
ALTER TABLE threads ADD COLUMN claim_fence BIGINT NOT NULL DEFAULT 0;
ALTER TABLE claims ADD COLUMN fencing_token BIGINT NOT NULL DEFAULT 0;
UPDATE threads SET claim_fence = 1 WHERE id IN (SELECT thread_id FROM claims);
UPDATE claims SET fencing_token = 1;
