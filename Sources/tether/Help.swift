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
                     migrations applied; stops both on Ctrl-C
          migrate    apply the numbered SQL migrations of schema/ to TETHER_DATABASE_URL
          replay     rebuild read models from the event log and swap them in while the
                     server keeps serving, or --verify them against the log
          postgres   start or stop a private PostgreSQL cluster (used by make test)
          help       show this text, or `tether help COMMAND`

        Every command takes --config FILE: a JSON object with the same keys as the
        variables below; variables set in the environment override the file.
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
        """

    static let dev = """
        Usage: tether dev [--config FILE] [--data DIR]

        Runs the server for development. With TETHER_DATABASE_URL unset, it starts a
        private PostgreSQL cluster in DIR (default .tether/pg; created with initdb on the
        first run, listening only on 127.0.0.1; run as the postgres user when started by
        root), creates the database "tether", applies migrations and serves on
        TETHER_LISTEN, which must be a loopback address. Ctrl-C stops the server, then
        PostgreSQL.

        It also mounts the development identity provider at /dev-idp: it mints Apple,
        Facebook and Google tokens with its own keys (kept in .tether/dev-idp), serves
        their key sets and a fake Facebook Graph API, and shows sent SMS messages.
        Provider settings point at it unless the environment sets them. GET /dev-idp/
        lists its endpoints. `tether serve` never mounts it.
        """

    static let migrate = """
        Usage: tether migrate [--config FILE] [--status]

        Applies the numbered SQL files of schema/ (or TETHER_SCHEMA_DIR) in order to
        TETHER_DATABASE_URL, each in its own transaction, recorded with a SHA-256
        checksum in schema_migrations. Concurrent runs are safe (an advisory lock makes
        one wait for the other). A file changed after it was applied is refused.

        --status   only report: exit 0 when every migration is applied, 1 otherwise
        """

    static let replay = """
        Usage: tether replay [--config FILE] [--projection NAME] [--verify]

        Rebuilds read models from the event log in TETHER_DATABASE_URL while the server
        keeps serving. Each projection (all of them, or --projection NAME; known: \(Projection.all.map(\.name).joined(separator: ", ")))
        is rebuilt into shadow tables in the schema tether_replay, built exactly like the
        live tables (columns, constraints and their names, indexes, grants). The log is
        read through today's upcasters, so old event schemas rebuild into today's read
        models. Once the copies have caught up with events appended meanwhile, one short
        transaction waits for the commands in flight, holds new ones back for a moment,
        applies the last events and swaps the copies in. A run is recorded in
        projection_replays (events, duration, events/s).

        --verify   rebuild aside and compare with the live tables instead of swapping:
                   prints every drifting row (missing, extra, or changed with both
                   values) on standard output and exits 1 on drift, 0 when the read
                   models match the log

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
        authentication for local connections). `start` creates the cluster on first use,
        starts it, and prints its superuser URL as the last line of standard output.
        --throwaway turns off fsync for test clusters. `stop` shuts it down (fast mode).
        """

    static func text(for command: String) -> String? {
        switch command {
        case "serve": serve
        case "dev": dev
        case "migrate": migrate
        case "replay": replay
        case "postgres": postgres
        case "help": overview
        default: nil
        }
    }
}
