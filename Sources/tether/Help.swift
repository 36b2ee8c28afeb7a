import TetherAPI

/// The `--help` texts of `tether` and each command.
enum Help {
    static let overview = """
        tether — account linking and user directory on an event-sourced PostgreSQL log

        Usage: tether COMMAND [OPTIONS]

        Commands:
          serve      run the server (production): needs TETHER_DATABASE_URL
          dev        run the server for development: its own PostgreSQL under .tether/pg,
                     migrations applied, sample users of seeds/ loaded; stops both on Ctrl-C
          migrate    apply the numbered SQL migrations of schema/ to TETHER_DATABASE_URL
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
        Usage: tether dev [--config FILE] [--data DIR] [--no-seeds]

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
        one wait for the other). A file changed after it was applied is refused.

        --status   only report: exit 0 when every migration is applied, 1 otherwise
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
        case "postgres": postgres
        case "help": overview
        default: nil
        }
    }
}
