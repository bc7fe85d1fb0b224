"""The PostgreSQL backend's versioned schema. Each entry migrates from version ``i`` to ``i + 1``.

The version is a row of ``schema_version``. Each migration runs in its own transaction
under a transaction-level advisory lock, so a fleet starting at once migrates once and
the others wait, then see the new version. A schema newer than this chatgate is refused.
"""

from __future__ import annotations

import asyncpg

from chatgate.domain.errors import StoreUnavailable

MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: every role's tables, as the SQLite schema has them at its version 8, and the fleet's
    # own: the live processes, which process a session's chat is reachable through (route_holder).
    """
    CREATE TABLE sessions (
        key                 TEXT PRIMARY KEY,
        session_id          TEXT NOT NULL,
        platform            TEXT NOT NULL,
        chat_id             TEXT,
        source_json         TEXT NOT NULL,
        scope               TEXT NOT NULL,
        created_at          DOUBLE PRECISION NOT NULL,
        last_activity       DOUBLE PRECISION NOT NULL,
        lease_owner         TEXT,
        lease_holder        TEXT,
        lease_expires       DOUBLE PRECISION,
        lease_token         BIGINT NOT NULL DEFAULT 0,
        retry_at            DOUBLE PRECISION,
        last_error          TEXT,
        preview_message_id  TEXT,
        route_holder        TEXT
    );
    CREATE INDEX sessions_by_activity ON sessions (last_activity);
    CREATE TABLE inbox (
        seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        transport     TEXT NOT NULL,
        delivery_id   TEXT NOT NULL,
        session_key   TEXT NOT NULL,
        status        TEXT NOT NULL,
        attempts      INTEGER NOT NULL DEFAULT 0,
        inbound_json  TEXT NOT NULL,
        admitted_at   DOUBLE PRECISION NOT NULL,
        finished_at   DOUBLE PRECISION,
        outcome       TEXT,
        claimed_by    TEXT,
        isolated      BOOLEAN NOT NULL DEFAULT FALSE,
        crashes       INTEGER NOT NULL DEFAULT 0,
        UNIQUE (transport, delivery_id)
    );
    CREATE INDEX inbox_queued ON inbox (session_key, seq) WHERE status = 'queued';
    CREATE TABLE transcript (
        id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id   TEXT NOT NULL,
        session_key  TEXT NOT NULL,
        role         TEXT NOT NULL,
        content      TEXT NOT NULL,
        created_at   DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX transcript_by_session ON transcript (session_id, id);
    CREATE TABLE outbox (
        id                   BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        idem_key             TEXT NOT NULL UNIQUE,
        platform             TEXT NOT NULL,
        chat_id              TEXT NOT NULL,
        session_key          TEXT NOT NULL,
        kind                 TEXT NOT NULL,
        text                 TEXT NOT NULL,
        in_reply_to          TEXT,
        target_json          TEXT NOT NULL,
        status               TEXT NOT NULL,
        attempts             INTEGER NOT NULL DEFAULT 0,
        possibly_duplicate   BOOLEAN NOT NULL DEFAULT FALSE,
        platform_message_id  TEXT,
        created_at           DOUBLE PRECISION NOT NULL,
        next_attempt_at      DOUBLE PRECISION,
        sent_at              DOUBLE PRECISION,
        confirmed_at         DOUBLE PRECISION,
        last_error           TEXT,
        sending_holder       TEXT,
        sending_expires      DOUBLE PRECISION,
        route_holder         TEXT
    );
    CREATE INDEX outbox_open ON outbox (platform, chat_id, id)
        WHERE status IN ('pending', 'sending', 'ambiguous');
    CREATE INDEX outbox_unconfirmed ON outbox (platform, chat_id, id)
        WHERE confirmed_at IS NULL AND status IN ('pending', 'sending', 'sent', 'ambiguous');
    CREATE TABLE chat_labels (
        platform      TEXT NOT NULL,
        scope         TEXT NOT NULL,
        chat_id       TEXT NOT NULL,
        chat_name     TEXT,
        chat_topic    TEXT,
        observed_seq  BIGINT NOT NULL,
        PRIMARY KEY (platform, scope, chat_id)
    );
    CREATE TABLE cursors (
        name        TEXT PRIMARY KEY,
        value       TEXT NOT NULL,
        updated_at  DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE rejected_inbound (
        id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        transport    TEXT NOT NULL,
        delivery_id  TEXT,
        reason       TEXT NOT NULL,
        excerpt      TEXT NOT NULL,
        received_at  DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE approvals (
        prompt_id          TEXT PRIMARY KEY,
        created_seq        BIGINT GENERATED ALWAYS AS IDENTITY,
        session_key        TEXT NOT NULL,
        session_id         TEXT NOT NULL,
        inbox_seq          BIGINT NOT NULL,
        call_id            TEXT NOT NULL,
        tool               TEXT NOT NULL,
        command            TEXT NOT NULL,
        rule_keys          TEXT NOT NULL,
        offered_tiers      TEXT NOT NULL,
        state              TEXT NOT NULL,
        tier               TEXT,
        reason             TEXT,
        requester_id       TEXT,
        requester_name     TEXT,
        requested_at       DOUBLE PRECISION NOT NULL,
        expires_at         DOUBLE PRECISION NOT NULL,
        answered_by_id     TEXT,
        answered_by_name   TEXT,
        answered_at        DOUBLE PRECISION,
        platform           TEXT NOT NULL,
        chat_id            TEXT NOT NULL,
        target_json        TEXT NOT NULL,
        reply_to           TEXT,
        prompt_text        TEXT NOT NULL,
        prompt_via         TEXT NOT NULL,
        prompt_message_id  TEXT
    );
    CREATE INDEX approvals_open ON approvals (platform, chat_id, requested_at) WHERE state = 'pending';
    CREATE TABLE approval_grants (
        scope        TEXT NOT NULL,
        session_key  TEXT NOT NULL,
        session_id   TEXT NOT NULL,
        rule_key     TEXT NOT NULL,
        command      TEXT NOT NULL,
        prompt_id    TEXT,
        granted_at   DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (scope, session_key, session_id, rule_key)
    );
    CREATE TABLE pairing_requests (
        platform       TEXT NOT NULL,
        user_id        TEXT NOT NULL,
        code           TEXT NOT NULL UNIQUE,
        user_name      TEXT,
        chat_id        TEXT,
        created_at     DOUBLE PRECISION NOT NULL,
        expires_at     DOUBLE PRECISION NOT NULL,
        last_reply_at  DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (platform, user_id)
    );
    CREATE TABLE paired_users (
        platform     TEXT NOT NULL,
        user_id      TEXT NOT NULL,
        user_name    TEXT,
        code         TEXT,
        approved_at  DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (platform, user_id)
    );
    CREATE TABLE pairing_guard (
        name          TEXT PRIMARY KEY,
        failures      INTEGER NOT NULL,
        locked_until  DOUBLE PRECISION
    );
    CREATE TABLE processes (
        holder      TEXT PRIMARY KEY,
        owner       TEXT,
        host        TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        started_at  DOUBLE PRECISION NOT NULL,
        seen_at     DOUBLE PRECISION NOT NULL,
        adapters    TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE store_health (
        id          INTEGER PRIMARY KEY,
        checked_at  DOUBLE PRECISION NOT NULL
    );
    """,
    # 1 -> 2: the roles SQLite gained at its versions 9 and 10: the API's bearer keys (only a
    # hash of each token, and an index of outbox keys in byte order for an exchange's reply parts);
    # schedules (a row holds the next firing; a firing is an inbox event);
    # background and delegated tasks with the origin their result is routed by.
    """
    CREATE TABLE api_keys (
        key_id      TEXT PRIMARY KEY,
        name        TEXT NOT NULL,
        token_hash  TEXT NOT NULL UNIQUE,
        created_at  DOUBLE PRECISION NOT NULL,
        revoked_at  DOUBLE PRECISION
    );
    CREATE TABLE schedules (
        id             TEXT PRIMARY KEY,
        origin         TEXT NOT NULL,
        name           TEXT,
        kind           TEXT NOT NULL,
        spec           TEXT NOT NULL,
        text           TEXT NOT NULL,
        target_json    TEXT NOT NULL,
        session_key    TEXT,
        deliver_only   BOOLEAN NOT NULL DEFAULT FALSE,
        paused         BOOLEAN NOT NULL DEFAULT FALSE,
        next_fire_at   DOUBLE PRECISION,
        last_fired_at  DOUBLE PRECISION,
        fired          INTEGER NOT NULL DEFAULT 0,
        created_at     DOUBLE PRECISION NOT NULL,
        meta_json      TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE NOT paused AND next_fire_at IS NOT NULL;
    CREATE INDEX schedules_session ON schedules (session_key);
    CREATE TABLE tasks (
        id                 TEXT PRIMARY KEY,
        kind               TEXT NOT NULL,
        parent_key         TEXT NOT NULL,
        parent_session_id  TEXT,
        child_key          TEXT NOT NULL UNIQUE,
        origin_json        TEXT NOT NULL,
        prompt             TEXT NOT NULL,
        created_at         DOUBLE PRECISION NOT NULL,
        status             TEXT NOT NULL,
        result             TEXT,
        finished_at        DOUBLE PRECISION,
        note               TEXT
    );
    CREATE INDEX tasks_parent ON tasks (parent_key, created_at);
    CREATE INDEX outbox_idem_bytes ON outbox ((idem_key COLLATE "C"));
    """,
    # 2 -> 3: web chat accounts, as SQLite's version 11 has them: users, sign-in tokens and
    # browser sessions (hashes only), and the account that owns each web chat with its title.
    """
    CREATE TABLE accounts (
        user_id        TEXT PRIMARY KEY,
        name           TEXT NOT NULL UNIQUE,
        role           TEXT NOT NULL,
        password_hash  TEXT,
        created_at     DOUBLE PRECISION NOT NULL,
        revoked_at     DOUBLE PRECISION
    );
    CREATE TABLE sign_in_tokens (
        token_id    TEXT PRIMARY KEY,
        user_id     TEXT NOT NULL,
        token_hash  TEXT NOT NULL UNIQUE,
        created_at  DOUBLE PRECISION NOT NULL,
        revoked_at  DOUBLE PRECISION
    );
    CREATE TABLE web_sessions (
        session_id   TEXT PRIMARY KEY,
        user_id      TEXT NOT NULL,
        cookie_hash  TEXT NOT NULL UNIQUE,
        via          TEXT,
        created_at   DOUBLE PRECISION NOT NULL,
        expires_at   DOUBLE PRECISION NOT NULL,
        ended_at     DOUBLE PRECISION
    );
    CREATE INDEX web_sessions_user ON web_sessions (user_id);
    CREATE TABLE web_chats (
        platform    TEXT NOT NULL,
        chat_id     TEXT NOT NULL,
        owner_id    TEXT NOT NULL,
        title       TEXT,
        created_at  DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (platform, chat_id)
    );
    CREATE INDEX web_chats_owner ON web_chats (owner_id, platform);
    """,
    # 11 -> 12: one user cannot slow everyone (issue 27, finding 7), as on SQLite: a
    # conversation's last activity and history pages by indexes; what a web chat's owner searches in a
    # full-text index (a tsvector with GIN), filled by triggers for web chats, backfilled here.
    """
    CREATE INDEX sessions_chat ON sessions (platform, chat_id, last_activity);
    CREATE INDEX outbox_chat ON outbox (platform, chat_id, created_at);
    CREATE INDEX inbox_session ON inbox (session_key, admitted_at);
    CREATE TABLE chat_text (
        id        BIGSERIAL PRIMARY KEY,
        platform  TEXT NOT NULL,
        chat_id   TEXT NOT NULL,
        body      TEXT NOT NULL,
        words     TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED
    );
    CREATE INDEX chat_text_words ON chat_text USING GIN (words);
    CREATE FUNCTION chat_text_reply() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO chat_text (platform, chat_id, body)
        SELECT NEW.platform, NEW.chat_id, NEW.text
        WHERE EXISTS (SELECT 1 FROM web_chats w WHERE w.platform = NEW.platform AND w.chat_id = NEW.chat_id);
        RETURN NULL;
    END $$;
    CREATE TRIGGER chat_text_reply AFTER INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION chat_text_reply();
    CREATE FUNCTION chat_text_message() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO chat_text (platform, chat_id, body)
        SELECT s.platform, s.chat_id, NEW.content FROM sessions s
        JOIN web_chats w ON w.platform = s.platform AND w.chat_id = s.chat_id
        WHERE s.key = NEW.session_key;
        RETURN NULL;
    END $$;
    CREATE TRIGGER chat_text_message AFTER INSERT ON transcript
        FOR EACH ROW WHEN (NEW.role = 'user') EXECUTE FUNCTION chat_text_message();
    INSERT INTO chat_text (platform, chat_id, body)
    SELECT o.platform, o.chat_id, o.text FROM outbox o
    JOIN web_chats w ON w.platform = o.platform AND w.chat_id = o.chat_id;
    INSERT INTO chat_text (platform, chat_id, body)
    SELECT s.platform, s.chat_id, t.content FROM transcript t
    JOIN sessions s ON s.key = t.session_key
    JOIN web_chats w ON w.platform = s.platform AND w.chat_id = s.chat_id
    WHERE t.role = 'user';
    """,
    # 12 -> 13: model profiles (issue 28), as on SQLite: a session's ``/model`` choice by its key.
    """
    CREATE TABLE session_profiles (
        session_key  TEXT PRIMARY KEY,
        profile      TEXT NOT NULL,
        updated_at   DOUBLE PRECISION NOT NULL
    );
    """,
    # 13 -> 14: attachments (issue 29), as on SQLite, and the blobs themselves: every process of a
    # fleet reads every blob, so they are rows, in chunks of about 1 MB (none held whole in memory
    # while it is written); ``media_blobs`` marks a blob whose chunks are all in.
    """
    CREATE TABLE media (
        key         TEXT PRIMARY KEY,
        sha         TEXT,
        mime        TEXT,
        size        BIGINT,
        name        TEXT NOT NULL,
        error       TEXT,
        created_at  DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX media_sha ON media (sha);
    CREATE TABLE media_chunks (
        sha   TEXT NOT NULL,
        idx   INTEGER NOT NULL,
        data  BYTEA NOT NULL,
        PRIMARY KEY (sha, idx)
    );
    CREATE TABLE media_blobs (
        sha         TEXT PRIMARY KEY,
        size        BIGINT NOT NULL,
        chunks      INTEGER NOT NULL,
        created_at  DOUBLE PRECISION NOT NULL
    );
    ALTER TABLE transcript ADD COLUMN media_json TEXT;
    """,
    # 14 -> 15: voice notes (issue 29). An audio file's transcript, or why it has none, kept
    # with its fetch outcome so a re-run turn does not transcribe again (engine/voice.py).
    """
    ALTER TABLE media ADD COLUMN transcript TEXT;
    ALTER TABLE media ADD COLUMN transcript_error TEXT;
    """,
    # 15 -> 16: retention and quotas (issue 29), as on SQLite (gateway_keys: fleet-wide secrets).
    """
    ALTER TABLE media ADD COLUMN owner TEXT;
    CREATE INDEX media_owner ON media (owner);
    CREATE INDEX media_created ON media (created_at);
    CREATE TABLE gateway_keys (name TEXT PRIMARY KEY, value BYTEA NOT NULL, created_at FLOAT8 NOT NULL);
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)
_MIGRATION_LOCK = "hashtextextended('chatgate-migrate/' || $1::text, 0)"


async def current_version(conn: asyncpg.Connection) -> int:
    """The schema's version (0: no chatgate tables yet)."""
    exists = await conn.fetchval("SELECT to_regclass('schema_version') IS NOT NULL")
    if not exists:
        return 0
    found = await conn.fetchval("SELECT version FROM schema_version")
    return int(found or 0)


async def migrate(conn: asyncpg.Connection, schema: str) -> int:
    """Create ``schema`` if needed and bring it to ``SCHEMA_VERSION``; refuse a newer one."""
    while True:
        async with conn.transaction():
            await conn.execute(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})", schema)
            await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            await conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            version = await current_version(conn)
            if version > SCHEMA_VERSION:
                raise StoreUnavailable(
                    f"postgresql schema {schema} is at v{version}, newer than this chatgate"
                    f" (v{SCHEMA_VERSION}); upgrade chatgate or point store.postgres.schema elsewhere"
                )
            if version == SCHEMA_VERSION:
                return SCHEMA_VERSION
            target = version + 1
            await conn.execute(MIGRATIONS[version])
            await conn.execute("DELETE FROM schema_version")
            await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", target)
