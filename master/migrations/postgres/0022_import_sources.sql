-- The folders of a policy's storage an admin import was asked to read (`path_or_prefix`; '' is
-- all of it): import areas, where bytes no file knows are files waiting to be imported, so the
-- blob collector leaves them alone.
CREATE TABLE import_sources (
    policy_id   TEXT NOT NULL,
    prefix      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (policy_id, prefix)
);
