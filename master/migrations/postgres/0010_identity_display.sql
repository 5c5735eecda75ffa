-- What a person recognises an identity by (an OAuth account's login or nickname), shown when
-- listing identities; the identifier itself is the provider's stable user id.
ALTER TABLE auth_identities ADD COLUMN display TEXT;
