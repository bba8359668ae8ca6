-- A person's own agents (SPEC §2, §4b): agent connections, addressing by connection, rights.
--
-- An agent token of a member is a *connection*: `connection` is the name she gave it (a slug,
-- unique among her live connections), `rights` her choice per impact (JSON; NULL = the
-- defaults). Tokens issued before this migration get a derived name, `agent-` and the hex of
-- their id, which she can rename.
ALTER TABLE tokens ADD COLUMN connection TEXT;
ALTER TABLE tokens ADD COLUMN rights TEXT;
UPDATE tokens SET connection = 'agent-' || substr(id, 5)
    WHERE scopes LIKE '%agent%'
      AND person_id IN (SELECT id FROM persons WHERE kind = 'member');
CREATE UNIQUE INDEX tokens_connection ON tokens (person_id, connection)
    WHERE connection IS NOT NULL AND revoked_at IS NULL;

-- The connection (token id) that wrote a message, when one did: a connection never receives its
-- own post, and its person's other agents see it named.
ALTER TABLE messages ADD COLUMN connection TEXT;

-- Who of the person may read an entry: `reader` NULL is everyone of hers, else one reader (a
-- connection's token id, or `person` for her own credentials); `skip_reader` is the one reader
-- it is not for (the author's own connection, on an entry in the author's own inbox).
ALTER TABLE inbox_entries ADD COLUMN reader TEXT;
ALTER TABLE inbox_entries ADD COLUMN skip_reader TEXT;

-- The connection (token id) holding a claim.
ALTER TABLE claims ADD COLUMN connection TEXT;

-- The reader (connection token id) that asked an open thread's question: another reader of the
-- same person answers it (her command, answered by her agent).
ALTER TABLE threads ADD COLUMN asker_reader TEXT;
