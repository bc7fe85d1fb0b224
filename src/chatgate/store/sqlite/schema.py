"""The SQLite backend's versioned schema. Each entry migrates from version ``i`` to ``i + 1``."""

from __future__ import annotations

import sqlite3

from chatgate.domain.errors import StoreUnavailable

MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: the durable pipeline.
    """
    CREATE TABLE sessions (
        key            TEXT PRIMARY KEY,
        session_id     TEXT NOT NULL,
        platform       TEXT NOT NULL,
        chat_id        TEXT,
        source_json    TEXT NOT NULL,
        created_at     REAL NOT NULL,
        last_activity  REAL NOT NULL,
        lease_owner    TEXT,
        lease_expires  REAL,
        retry_at       REAL,
        last_error     TEXT
    );
    CREATE TABLE inbox (
        seq           INTEGER PRIMARY KEY AUTOINCREMENT,
        transport     TEXT NOT NULL,
        delivery_id   TEXT NOT NULL,
        session_key   TEXT NOT NULL,
        status        TEXT NOT NULL,
        attempts      INTEGER NOT NULL DEFAULT 0,
        inbound_json  TEXT NOT NULL,
        admitted_at   REAL NOT NULL,
        finished_at   REAL,
        outcome       TEXT,
        UNIQUE (transport, delivery_id)
    );
    CREATE INDEX inbox_queued ON inbox (session_key, seq) WHERE status = 'queued';
    CREATE TABLE transcript (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id   TEXT NOT NULL,
        session_key  TEXT NOT NULL,
        role         TEXT NOT NULL,
        content      TEXT NOT NULL,
        created_at   REAL NOT NULL
    );
    CREATE INDEX transcript_by_session ON transcript (session_id, id);
    CREATE TABLE outbox (
        id                   INTEGER PRIMARY KEY AUTOINCREMENT,
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
        possibly_duplicate   INTEGER NOT NULL DEFAULT 0,
        platform_message_id  TEXT,
        created_at           REAL NOT NULL,
        next_attempt_at      REAL,
        sent_at              REAL,
        confirmed_at         REAL,
        last_error           TEXT
    );
    CREATE INDEX outbox_open ON outbox (platform, chat_id, id)
        WHERE status IN ('pending', 'sending');
    CREATE INDEX outbox_unconfirmed ON outbox (platform, chat_id, id)
        WHERE confirmed_at IS NULL AND status IN ('pending', 'sending', 'sent', 'ambiguous');
    CREATE TABLE chat_labels (
        platform      TEXT NOT NULL,
        scope         TEXT NOT NULL,
        chat_id       TEXT NOT NULL,
        chat_name     TEXT,
        chat_topic    TEXT,
        observed_seq  INTEGER NOT NULL,
        PRIMARY KEY (platform, scope, chat_id)
    );
    """,
    # 1 -> 2: which owner's turn an item is in, so status can tell running from waiting.
    """
    ALTER TABLE inbox ADD COLUMN claimed_by TEXT;
    """,
    # 2 -> 3: rows left ambiguous (no answer from the platform) are open too.
    """
    DROP INDEX outbox_open;
    CREATE INDEX outbox_open ON outbox (platform, chat_id, id)
        WHERE status IN ('pending', 'sending', 'ambiguous');
    """,
    # 3 -> 4: named cursors of upstream transports (e.g. a Telegram getUpdates offset).
    """
    CREATE TABLE cursors (
        name        TEXT PRIMARY KEY,
        value       TEXT NOT NULL,
        updated_at  REAL NOT NULL
    );
    """,
    # 4 -> 5: inbound deliveries that can never be admitted (malformed, unsupported), with why.
    """
    CREATE TABLE rejected_inbound (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        transport    TEXT NOT NULL,
        delivery_id  TEXT,
        reason       TEXT NOT NULL,
        excerpt      TEXT NOT NULL,
        received_at  REAL NOT NULL
    );
    """,
    # 5 -> 6: approval prompts for dangerous tool calls, and the approvals people chose to remember.
    """
    CREATE TABLE approvals (
        prompt_id          TEXT PRIMARY KEY,
        session_key        TEXT NOT NULL,
        session_id         TEXT NOT NULL,
        inbox_seq          INTEGER NOT NULL,
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
        requested_at       REAL NOT NULL,
        expires_at         REAL NOT NULL,
        answered_by_id     TEXT,
        answered_by_name   TEXT,
        answered_at        REAL,
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
        granted_at   REAL NOT NULL,
        PRIMARY KEY (scope, session_key, session_id, rule_key)
    );
    """,
    # 6 -> 7: DM pairing: strangers' one-time codes, the users the operator approved, the lockout.
    """
    CREATE TABLE pairing_requests (
        platform       TEXT NOT NULL,
        user_id        TEXT NOT NULL,
        code           TEXT NOT NULL UNIQUE,
        user_name      TEXT,
        chat_id        TEXT,
        created_at     REAL NOT NULL,
        expires_at     REAL NOT NULL,
        last_reply_at  REAL NOT NULL,
        PRIMARY KEY (platform, user_id)
    );
    CREATE TABLE paired_users (
        platform     TEXT NOT NULL,
        user_id      TEXT NOT NULL,
        user_name    TEXT,
        code         TEXT,
        approved_at  REAL NOT NULL,
        PRIMARY KEY (platform, user_id)
    );
    CREATE TABLE pairing_guard (
        name          TEXT PRIMARY KEY,
        failures      INTEGER NOT NULL,
        locked_until  REAL
    );
    """,
    # 7 -> 8: a death is blamed on a message only when it ran isolated (the one suspect running);
    # the streamed preview of a running turn is recorded so a successor can take it over.
    """
    ALTER TABLE inbox ADD COLUMN isolated INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE inbox ADD COLUMN crashes INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN preview_message_id TEXT;
    """,
    # 8 -> 9: bearer keys of the OpenAI-compatible API (only a hash of each token).
    """
    CREATE TABLE api_keys (
        key_id      TEXT PRIMARY KEY,
        name        TEXT NOT NULL,
        token_hash  TEXT NOT NULL UNIQUE,
        created_at  REAL NOT NULL,
        revoked_at  REAL
    );
    """,
    # 9 -> 10: schedules and tasks (issue 19): a schedule's next firing (a firing is an inbox event);
    # background and delegated tasks with the origin their result is routed by.
    """
    CREATE TABLE schedules (
        id             TEXT PRIMARY KEY,
        origin         TEXT NOT NULL,
        name           TEXT,
        kind           TEXT NOT NULL,
        spec           TEXT NOT NULL,
        text           TEXT NOT NULL,
        target_json    TEXT NOT NULL,
        session_key    TEXT,
        deliver_only   INTEGER NOT NULL DEFAULT 0,
        paused         INTEGER NOT NULL DEFAULT 0,
        next_fire_at   REAL,
        last_fired_at  REAL,
        fired          INTEGER NOT NULL DEFAULT 0,
        created_at     REAL NOT NULL,
        meta_json      TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE paused = 0 AND next_fire_at IS NOT NULL;
    CREATE INDEX schedules_session ON schedules (session_key);
    CREATE TABLE tasks (
        id                 TEXT PRIMARY KEY,
        kind               TEXT NOT NULL,
        parent_key         TEXT NOT NULL,
        parent_session_id  TEXT,
        child_key          TEXT NOT NULL UNIQUE,
        origin_json        TEXT NOT NULL,
        prompt             TEXT NOT NULL,
        created_at         REAL NOT NULL,
        status             TEXT NOT NULL,
        result             TEXT,
        finished_at        REAL,
        note               TEXT
    );
    CREATE INDEX tasks_parent ON tasks (parent_key, created_at);
    """,
    # 10 -> 11: web chat accounts (issue 17): users, sign-in tokens and browser sessions (hashes
    # only), and the account that owns each web chat with its title.
    """
    CREATE TABLE accounts (
        user_id        TEXT PRIMARY KEY,
        name           TEXT NOT NULL UNIQUE,
        role           TEXT NOT NULL,
        password_hash  TEXT,
        created_at     REAL NOT NULL,
        revoked_at     REAL
    );
    CREATE TABLE sign_in_tokens (
        token_id    TEXT PRIMARY KEY,
        user_id     TEXT NOT NULL,
        token_hash  TEXT NOT NULL UNIQUE,
        created_at  REAL NOT NULL,
        revoked_at  REAL
    );
    CREATE TABLE web_sessions (
        session_id   TEXT PRIMARY KEY,
        user_id      TEXT NOT NULL,
        cookie_hash  TEXT NOT NULL UNIQUE,
        via          TEXT,
        created_at   REAL NOT NULL,
        expires_at   REAL NOT NULL,
        ended_at     REAL
    );
    CREATE INDEX web_sessions_user ON web_sessions (user_id);
    CREATE TABLE web_chats (
        platform    TEXT NOT NULL,
        chat_id     TEXT NOT NULL,
        owner_id    TEXT NOT NULL,
        title       TEXT,
        created_at  REAL NOT NULL,
        PRIMARY KEY (platform, chat_id)
    );
    CREATE INDEX web_chats_owner ON web_chats (owner_id, platform);
    """,
    # 11 -> 12: one user cannot slow everyone (issue 27, finding 7). A conversation's last
    # activity is an index lookup, not a scan of every session; what a web chat's owner
    # searches (their messages, the replies) is in a full-text index (FTS5), filled by triggers
    # for chats that are web chats, and backfilled here.
    """
    CREATE INDEX sessions_chat ON sessions (platform, chat_id, last_activity);
    CREATE INDEX outbox_chat ON outbox (platform, chat_id, created_at);
    CREATE INDEX inbox_session ON inbox (session_key, admitted_at);
    CREATE VIRTUAL TABLE chat_text USING fts5(
        body, platform UNINDEXED, chat_id UNINDEXED, tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER chat_text_reply AFTER INSERT ON outbox
    WHEN EXISTS (SELECT 1 FROM web_chats w WHERE w.platform = NEW.platform AND w.chat_id = NEW.chat_id)
    BEGIN
        INSERT INTO chat_text (body, platform, chat_id) VALUES (NEW.text, NEW.platform, NEW.chat_id);
    END;
    CREATE TRIGGER chat_text_message AFTER INSERT ON transcript WHEN NEW.role = 'user'
    BEGIN
        INSERT INTO chat_text (body, platform, chat_id)
        SELECT NEW.content, s.platform, s.chat_id FROM sessions s
        JOIN web_chats w ON w.platform = s.platform AND w.chat_id = s.chat_id
        WHERE s.key = NEW.session_key;
    END;
    INSERT INTO chat_text (body, platform, chat_id)
    SELECT o.text, o.platform, o.chat_id FROM outbox o
    JOIN web_chats w ON w.platform = o.platform AND w.chat_id = o.chat_id;
    INSERT INTO chat_text (body, platform, chat_id)
    SELECT t.content, s.platform, s.chat_id FROM transcript t
    JOIN sessions s ON s.key = t.session_key
    JOIN web_chats w ON w.platform = s.platform AND w.chat_id = s.chat_id
    WHERE t.role = 'user';
    """,
    # 12 -> 13: model profiles (issue 28). A session's ``/model`` choice, by session key (it
    # outlives ``/new``); a session that never chose has no row and uses the default profile.
    """
    CREATE TABLE session_profiles (
        session_key  TEXT PRIMARY KEY,
        profile      TEXT NOT NULL,
        updated_at   REAL NOT NULL
    );
    """,
    # 13 -> 14: attachments (issue 29). What each attachment's fetch gave (a blob's sha, its
    # type, size and name, or why there is none), keyed by inbox seq and index, so a re-run turn
    # does not fetch again; the transcript row keeps the items it sent the model. Blobs are
    # files under <state dir>/blobs (store/sqlite/media.py), not rows.
    """
    CREATE TABLE media (
        key         TEXT PRIMARY KEY,
        sha         TEXT,
        mime        TEXT,
        size        INTEGER,
        name        TEXT NOT NULL,
        error       TEXT,
        created_at  REAL NOT NULL
    );
    CREATE INDEX media_sha ON media (sha);
    ALTER TABLE transcript ADD COLUMN media_json TEXT;
    """,
    # 14 -> 15: voice notes (issue 29). An audio file's transcript, or why it has none, kept
    # with its fetch outcome so a re-run turn does not transcribe again (engine/voice.py).
    """
    ALTER TABLE media ADD COLUMN transcript TEXT;
    ALTER TABLE media ADD COLUMN transcript_error TEXT;
    """,
    # 15 -> 16: retention and quotas (issue 29). Whose file a record is (``<platform>:<user>``),
    # so a user's stored bytes are counted from the records; records expire by ``created_at``.
    # ``gateway_keys``: secrets made once and shared by every process (a web upload's signing key).
    """
    ALTER TABLE media ADD COLUMN owner TEXT;
    CREATE INDEX media_owner ON media (owner);
    CREATE INDEX media_created ON media (created_at);
    CREATE TABLE gateway_keys (
        name        TEXT PRIMARY KEY,
        value       BLOB NOT NULL,
        created_at  REAL NOT NULL
    );
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)


def statements(script: str) -> list[str]:
    """A migration's statements, each whole (a trigger's body holds semicolons of its own)."""
    found: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                found.append(pending.strip())
            pending = ""
    if pending.strip(" \n;"):
        found.append(pending.strip())
    return found


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema to ``SCHEMA_VERSION``; refuse a newer database."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreUnavailable(
            f"database schema v{version} is newer than this chatgate (v{SCHEMA_VERSION});"
            " upgrade chatgate or point it at another state directory"
        )
    for target in range(version, SCHEMA_VERSION):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in statements(MIGRATIONS[target]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {target + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return SCHEMA_VERSION
