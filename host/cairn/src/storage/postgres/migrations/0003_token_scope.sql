-- A token's scope: 'tenant' (its tenant's conversations) or 'operator' (also the node-wide
-- tools). Tokens created before scopes existed are tenant tokens.
ALTER TABLE cairn_tokens ADD COLUMN scope text NOT NULL DEFAULT 'tenant' CHECK (scope IN ('tenant', 'operator'));
