-- Cairn's record on PostgreSQL, version 1. Every row belongs to one tenant's conversation.

CREATE TABLE cairn_conversations (
    tenant     text NOT NULL,
    key        text NOT NULL,
    -- The lifecycle's state document (JSON), replaced as a whole.
    state      bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, key)
);

-- The append-only event log: one row per event, numbered from 1 in each conversation. The
-- primary key is what keeps two writers from both appending event N.
CREATE TABLE cairn_events (
    tenant text   NOT NULL,
    key    text   NOT NULL,
    seq    bigint NOT NULL CHECK (seq > 0),
    body   text   NOT NULL,
    PRIMARY KEY (tenant, key, seq),
    FOREIGN KEY (tenant, key) REFERENCES cairn_conversations
);

-- The originals each compaction set aside (JSON lines), with their size and hash checked on read.
CREATE TABLE cairn_archives (
    tenant         text   NOT NULL,
    key            text   NOT NULL,
    archive_id     text   NOT NULL,
    entries        bytea  NOT NULL,
    entries_len    bigint NOT NULL,
    entries_sha256 bytea  NOT NULL,
    PRIMARY KEY (tenant, key, archive_id),
    FOREIGN KEY (tenant, key) REFERENCES cairn_conversations
);
CREATE INDEX cairn_archives_by_id ON cairn_archives (tenant, archive_id);

CREATE TABLE cairn_artifacts (
    tenant     text    NOT NULL,
    key        text    NOT NULL,
    archive_id text    NOT NULL,
    idx        integer NOT NULL CHECK (idx > 0),
    content    bytea   NOT NULL,
    len        bigint  NOT NULL,
    sha256     bytea   NOT NULL,
    PRIMARY KEY (tenant, key, archive_id, idx),
    FOREIGN KEY (tenant, key, archive_id) REFERENCES cairn_archives ON DELETE CASCADE
);

-- Notices for the harness, in the order queued, until acknowledged.
CREATE TABLE cairn_notices (
    tenant text    NOT NULL,
    key    text    NOT NULL,
    id     text    NOT NULL,
    queued bigserial,
    body   text    NOT NULL,
    acked  boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant, key, id),
    FOREIGN KEY (tenant, key) REFERENCES cairn_conversations
);

-- Bearer tokens of `cairn serve --http`: only the SHA-256 of each secret.
CREATE TABLE cairn_tokens (
    id         text    PRIMARY KEY,
    tenant     text    NOT NULL,
    name       text    NOT NULL,
    sha256     text    NOT NULL UNIQUE,
    created_at bigint  NOT NULL,
    revoked    boolean NOT NULL DEFAULT false
);

-- Large values are stored out of line without compression: pglz costs more CPU per compaction
-- than it saves on JSON that is written once and read rarely.
ALTER TABLE cairn_events ALTER COLUMN body SET STORAGE EXTERNAL;
ALTER TABLE cairn_archives ALTER COLUMN entries SET STORAGE EXTERNAL;
ALTER TABLE cairn_artifacts ALTER COLUMN content SET STORAGE EXTERNAL;
ALTER TABLE cairn_conversations ALTER COLUMN state SET STORAGE EXTERNAL;
