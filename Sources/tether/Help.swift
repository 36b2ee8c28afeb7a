import TetherAPI
import TetherPostgres

/// The `--help` texts of `tether` and each command.
enum Help {
    static let overview = """
        tether — account linking and user directory on an event-sourced PostgreSQL log

        Usage: tether COMMAND [OPTIONS]

        Commands:
          serve      run the server (production): needs TETHER_DATABASE_URL
          dev        run the server for development: its own PostgreSQL under .tether/pg,
                     migrations applied, sample users of seeds/ loaded; stops both on Ctrl-C
                     (a PostgreSQL already running there, another tether dev's, is used and left running,
                     and one it started is left running while another client still uses it)
          migrate    apply the numbered SQL migrations of schema/ to TETHER_DATABASE_URL
          replay     rebuild read models from the event log and swap them in while the
                     server keeps serving, or --verify them against the log
          postgres   start or stop a private PostgreSQL cluster (used by make test)
          history    a user's timeline, oldest first: USER (id), EMAIL or PROVIDER:UID
          admin-keys create, list or revoke keys of the support and admin API (/v1/admin)
          export     everything held about one person (USER, EMAIL or PROVIDER:UID) as JSON
          keys       check or rotate the master key that wraps every stored personal-data key
          webhooks   create, list, disable, enable, delete, rotate-secret or replay the
                     subscriptions that push the public event feed to backends
          sweep      erase anonymous users nobody has used for a while
          firebase   service-account create, list or revoke: keys firebase-admin signs custom tokens with
          help       show this text, or `tether help COMMAND`

        Every command but postgres takes --config FILE: a JSON object with the same
        keys as the variables below, each once (strings, numbers, booleans or lists);
        variables set in the environment override the file, an empty one counts as unset
        (a provider's id list or secret set empty is refused as a mistake).
        Run `tether COMMAND --help` for a command's options.

        Configuration:
        \(variableTable)
        """

    static var variableTable: String {
        let width = TetherConfiguration.variables.map(\.name.count).max() ?? 0
        return TetherConfiguration.variables.map { variable in
            let padded = variable.name.padding(toLength: width, withPad: " ", startingAt: 0)
            let meaning = variable.meaning.isEmpty ? "" : "; \(variable.meaning)"
            return "  \(padded)  default: \(variable.defaultValue)\(meaning)"
        }.joined(separator: "\n")
    }

    static let serve = """
        Usage: tether serve [--config FILE]

        Runs the HTTP server against TETHER_DATABASE_URL on TETHER_LISTEN. It does not
        migrate: run `tether migrate` first (GET /readyz answers 503 while migrations are
        pending). Every database connection acts as the role tether_service, which may
        read and append events but never change or delete them. SIGTERM or SIGINT stops
        accepting connections, lets requests in flight finish, then exits.

        It needs TETHER_MASTER_KEY_FILE, the key that wraps every user's personal-data key
        (make one: head -c 32 /dev/urandom | base64 > master.key), and refuses to start
        without it.

        The email flows (password reset, verification, email change) mail through
        TETHER_MAIL_WEBHOOK_URL, which needs TETHER_MAIL_WEBHOOK_SECRET and
        TETHER_PUBLIC_URL (the links' base); without a mail webhook they answer 503
        mail_unavailable.

        With TETHER_DATABASE_READ_URL (a streaming standby), admin search, user detail,
        history and the event feed are read there; commands and users' own reads stay
        on TETHER_DATABASE_URL. A read URL that reaches another cluster, or another
        database than the primary's, stops the start.
        """

    static let dev = """
        Usage: tether dev [--config FILE] [--data DIR] [--no-seeds]

        Runs the server for development. With TETHER_DATABASE_URL unset, it starts a
        private PostgreSQL cluster in DIR (default .tether/pg; created with initdb on the
        first run, listening only on 127.0.0.1; run as the postgres user when started by
        root), creates the database "tether", applies migrations and serves on
        TETHER_LISTEN, which must be a loopback address with a fixed port. Ctrl-C stops
        the server, then PostgreSQL, unless another client (a second tether dev on the
        same DIR) still uses it: then it is left running for that one, and
        `tether postgres stop --data DIR` stops it.

        It also mounts the development identity provider at /dev-idp: it mints Apple,
        Facebook and Google tokens with its own keys (kept in .tether/dev-idp), serves
        their key sets and a fake Facebook Graph API, and shows sent SMS messages
        (GET /dev-idp/sms) and mails (GET /dev-idp/mail: password reset, verification
        and email change codes with their links, which start from the request's host
        unless TETHER_PUBLIC_URL is set). Provider settings point at it unless the
        environment sets them, and mails go to it unless TETHER_MAIL_WEBHOOK_URL is
        set. GET /dev-idp/ lists its endpoints. `tether serve` never mounts it.

        Once the server listens, it loads the sample users of seeds/ (beside schema/;
        seeds/README.md lists them) through the same commands a client sends, with
        tokens minted by the dev identity provider. Steps already in the log are
        skipped, so a restart changes nothing. A step that fails stops start-up.

        --no-seeds   start without loading seeds/
        """

    static let migrate = """
        Usage: tether migrate [--config FILE] [--status]

        Applies the numbered SQL files of schema/ (or TETHER_SCHEMA_DIR) in order to
        TETHER_DATABASE_URL, each in its own transaction, recorded with a SHA-256
        checksum in schema_migrations. Concurrent runs are safe (an advisory lock makes
        one wait for the other). Pending migrations also wait for a running tether
        replay to finish (its swap would undo them; migrate says so while it waits), and
        a replay does not start while they are applied. A file changed after it was applied is refused.
        A migration that changes how read models are written asks for them to be rebuilt
        (027 seals their personal data): migrate then rebuilds them from the log, as
        tether replay does, with the master key of TETHER_MASTER_KEY_FILE; until that
        is done GET /readyz answers 503 and a starting server refuses commands.

        --status   only report: exit 0 when every migration is applied and no rebuild they
                   asked for waits, 1 otherwise
        """

    static let replay = """
        Usage: tether replay [--config FILE] [--projection NAME] [--verify]

        Rebuilds read models from the event log in TETHER_DATABASE_URL while the server
        keeps serving. Each projection (all of them, or --projection NAME; known: \(Projection.all.map(\.name).joined(separator: ", ")))
        is rebuilt into shadow tables in the schema tether_replay, built exactly like the
        live tables (columns, constraints and their names, indexes, grants). The log is
        read through today's upcasters, so old event schemas rebuild into today's read
        models. The accounts projection is first loaded in bulk: the log written before
        the run began is read user by user, each user's final rows are computed in
        memory and written with COPY, and the keys and indexes are built afterwards;
        events appended meanwhile are then applied in log order, in batches. Once the
        copies have caught up, one short transaction waits for the commands in flight,
        holds new ones back for a moment, applies the last events and swaps the copies
        in. A run is recorded in projection_replays (events, duration, events/s, and the
        bulk phase's events and duration).

        --verify   rebuild aside and compare with the live tables instead of swapping
                   (each table by a digest of its rows first, row by row only where
                   the digests differ): prints every drifting row (missing, extra, or
                   changed with both values), and each user or session id that
                   sessions or refresh tokens name and the tables lack (no foreign key
                   checks them at each write; up to 100 ids each), on standard output;
                   exits 1 on drift, 0 when the read models match the log, and 3 when
                   the verification could not run (no database, another replay running)

        Runs as the database's login role, which owns the tables (as tether migrate
        does), never as tether_service. One replay runs at a time per database.
        Progress goes to standard error (a bar with events/s and ETA on a terminal,
        plain lines otherwise); a summary line per projection to standard output.
        Ctrl-C (SIGINT) or SIGTERM stops it, drops the shadow tables and exits non-zero
        with the live tables untouched; shadow tables left by a killed run are dropped
        by the next one.
        """

    static let postgres = """
        Usage: tether postgres start --data DIR [--port N] [--throwaway]
               tether postgres stop --data DIR

        Manages a private PostgreSQL cluster on 127.0.0.1 (no Unix socket, trust
        authentication for local connections). `start` creates the cluster on first use
        (in a new or empty DIR: a file, or a directory holding other files, is refused and
        left as it is), starts it, and prints its superuser URL as the last line of
        standard output.
        --throwaway turns off fsync for test clusters. `stop` shuts it down (fast mode).
        """

    static let history = """
        Usage: tether history USER|EMAIL|PROVIDER:UID [--json] [--since WHEN] [--config FILE]

        Prints a user's timeline, oldest first: every event about them from every
        stream (their own, and the admin-key streams that record who looked at them or
        acted on them), as an aligned table of time, event, surface, actor, client IP
        and a one-line summary, then a line counting the events.

        The user is named by their id (a UUID), an email (theirs or a linked
        identity's, any case), or PROVIDER:UID (apple:001234.abc, password:ada@example.com).
        An id works for an erased user too; personal data that has been erased shows
        as (erased). Reads TETHER_DATABASE_URL.

        --json        one JSON object instead: {"userId", "events": [{"position", "time",
                      "type", "stream", "surface", "actor": {"kind", "id"}, "clientIP",
                      "userAgent", "commandId", "summary", "personalDataErased"}],
                      "nextAfter": null}, the same shape as GET /v1/admin/users/{id}/history
        --since WHEN  only events since WHEN: a date (2026-11-29, midnight UTC), a date and
                      time (2026-11-29T13:00:00Z), or a span back from now (90m, 24h, 7d);
                      1970-01-01 or later, a span of at most 100 years
        """

    static let adminKeys = """
        Usage: tether admin-keys create --role support|admin [--name NAME] [--config FILE]
               tether admin-keys list [--json] [--config FILE]
               tether admin-keys revoke ID [--config FILE]

        Keys of the support and admin API (/v1/admin, Authorization: Bearer <key>).
        A support key reads (search, user detail, history, the event feed); an admin key
        also acts (disable, enable, revoke sessions, erase), exports a user, manages
        webhooks and sees the feed's personal members. Every request made with a key is recorded
        as an event in its stream admin-key-<id>, and so are its creation and revocation.
        Reads and writes TETHER_DATABASE_URL.

        create   makes a key (tadm_ and 43 more characters) and prints it alone on the last
                 line of standard output. It is shown this once: only its SHA-256 is stored.
                 --name labels it (who or what uses it; up to 100 characters on one
                 line, without control or formatting characters).
        list     every key, oldest first: id, role, name, created, last used, revoked
                 (--json: an array of {"id","name","role","createdAt","revokedAt","lastUsedAt"})
        revoke   stops the key with this id at once (revoking a revoked key changes nothing)
        """

    static let keys = """
        Usage: tether keys check [--config FILE]
               tether keys rotate-master --new FILE [--config FILE]

        Every user's personal-data key is stored wrapped (AES-256-GCM) with the master key of
        TETHER_MASTER_KEY_FILE (tether dev makes .tether/master.key: set the variable to it for
        commands against tether dev's database), so a dump of the
        database without that file cannot open the log. So are the day keys that seal records
        about no one (admin search terms, failed sign-ins of unknown accounts) for 30 days,
        and the keys of keyed hashes and of the read models' seal (hash_keys: the emails,
        names and uids in users, identities and mfa_factors are sealed under it), and the
        secrets of signing keys, webhooks and Firebase service accounts.
        Keys stored before wrapping are read as they are until a rotation wraps them.
        With a key file set, tether serve and tether dev (when the database answers at
        start) and history, export, admin-keys, sweep, webhooks and firebase refuse to go
        on when a stored key is wrapped by a master key their configuration lacks (a wrong
        key file would wrap new secrets nothing else can open).

        check          counts the stored keys by what wraps them: the current master key, an
                       older one, an unknown one (exit 1: this configuration cannot read them),
                       none, or destroyed (by an erasure, or a day key past its 30 days)
        rotate-master  re-wraps every stored key with the key in FILE, in one transaction and
                       without touching an event; until it commits the old file keeps working.
                       Run the servers with TETHER_MASTER_KEY_FILE=FILE,OLD first (the first
                       wraps, both unwrap), rotate, then name FILE alone.
        """

    static let export = """
        Usage: tether export USER|EMAIL|PROVIDER:UID [--config FILE] > user.json

        Prints one JSON document with everything Tether holds about the person:
        {"exportedAt", "userId", "erased", "profile", "events"}. The profile is the user
        with identities, sessions and second factors (null once erased); the events are
        every event about them from every stream, oldest first, each with its history
        line and its decrypted payload, admin reads of them included. No secret is
        exported (password, code and refresh-token hashes, TOTP secrets). For an erased
        user the events remain without personal data. The export is recorded as
        UserDataExported, so the person's history shows it. Reads TETHER_DATABASE_URL.
        """

    static let webhooks = """
        Usage: tether webhooks create --url URL [--events user.*,identity.linked] [--from now|start|CURSOR] [--no-personal]
               tether webhooks list [--json]
               tether webhooks disable|enable|delete|rotate-secret ID
               tether webhooks replay ID --from start|CURSOR
               (each takes --config FILE)

        Subscriptions that push the public event feed (GET /v1/admin/events) to a backend:
        each is a reader of the log with its own position, delivered by the running server
        (tether serve or dev) at least once, in log order, signed per Standard Webhooks
        (webhook-id, webhook-timestamp, webhook-signature: v1,<base64 HMAC-SHA256>). Reads
        and writes TETHER_DATABASE_URL.

        create         --url must be https (TETHER_WEBHOOK_ALLOW_HTTP=1 allows http) and may not
                       resolve to a private or local address unless its host is listed in
                       TETHER_WEBHOOK_ALLOWED_HOSTS. --events takes public types or prefixes
                       (default *). --from: now (default), start, or a cursor. --no-personal
                       leaves addresses, names and uids out. Prints the signing secret whsec_…
                       alone on the last line, this once.
        list           every subscription: status (active, disabled, failing), cursor, attempts
        disable/enable stops or restarts delivery; enable forgets the failures
        delete         removes the subscription and its delivery records for good (disable keeps them)
        rotate-secret  a new secret; the old one signs too for 24 hours
        replay         delivers again every event after --from; a failing subscription is active
                       again, a disabled one stays disabled until enabled
        """

    static let sweep = """
        Usage: tether sweep anonymous --inactive-for SPAN [--dry-run] [--config FILE]

        Erases anonymous users (their only identity is anonymous) that nobody has used
        for SPAN (at least an hour: 24h, 30d): not signed in, refreshed, or seen with a
        Parse session token since. Each goes through the normal erasure, as
        DELETE /v1/admin/users/{id} does: their sessions end, a UserErased event is
        recorded (actor: you, at the command line) and their personal data key is
        destroyed. A user who signs in or links a real identity while the sweep runs is
        left alone. --dry-run only counts them. Reads and writes TETHER_DATABASE_URL.
        """

    static let firebase = """
        Usage: tether firebase service-account create [--config FILE]
               tether firebase service-account list [--config FILE]
               tether firebase service-account revoke KEY_ID [--config FILE]

        Makes a service account of the Firebase project Tether serves
        (TETHER_FIREBASE_PROJECT_ID) and prints, on standard output, the JSON that
        firebase-admin's credentials.Certificate loads: type, project_id,
        private_key_id, private_key, client_email. The private key is shown this once;
        Tether keeps only the public key, and accepts custom tokens it signs (RS256,
        kid = private_key_id, iss = sub = client_email, at most an hour) at
        accounts:signInWithCustomToken. Save it with
        `tether firebase service-account create > service-account.json`.

        list     every service account: key id, email, created, revoked
        revoke   stops the account with this key id at once: tokens it signs are refused
        Reads and writes TETHER_DATABASE_URL.
        """

    static func text(for command: String) -> String? {
        switch command {
        case "serve": serve
        case "dev": dev
        case "migrate": migrate
        case "replay": replay
        case "postgres": postgres
        case "history": history
        case "admin-keys": adminKeys
        case "webhooks": webhooks
        case "export": export
        case "keys": keys
        case "sweep": sweep
        case "firebase": firebase
        case "help": overview
        default: nil
        }
    }
}
