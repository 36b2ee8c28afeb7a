/// Copies of a projection's live tables in the schema `tether_replay`, and the swap
/// that puts them in place of the live ones.
///
/// A copy must be indistinguishable from the live table after the swap: callers map
/// constraint names to domain errors (`identities_provider_uid_key` means "credential
/// already in use"), the service role needs its grants, and the planner needs the
/// indexes. So the copy takes
///
/// - columns, types, defaults, `NOT NULL`, named `CHECK` constraints, storage and
///   compression from `CREATE TABLE … (LIKE …)`;
/// - primary key, unique and exclusion constraints under their live names, from
///   `pg_get_constraintdef`, so their indexes carry the same names too;
/// - other indexes under their live names (a separate schema lets two indexes share a
///   name until the swap), from `pg_get_indexdef` pointed at the copy;
/// - foreign keys, added once every copy exists with the shadow schema first on the
///   search path, so a reference between projection tables points at the copy and
///   one to any other table keeps pointing at the live table;
/// - table privileges (`tether_service`) and storage parameters, its TOAST table's included,
///   except that autovacuum stays off on a copy until the swap (``copyOptions``).
///
/// Then ``verifyShapes(on:)`` compares a fingerprint of every copy with its live
/// table (columns, constraints, indexes, triggers, privileges, row security) and
/// refuses to go on if anything differs, so a table feature this code does not copy
/// (a trigger, say) stops the replay instead of vanishing at the swap.
///
/// The swap drops the live tables and moves the copies into the live schema with
/// `ALTER TABLE … SET SCHEMA`, which keeps every name, index, constraint and grant.
struct ShadowTables {
    /// The schema the copies are built in; dropped when a run ends, whatever its end.
    static let schema = "tether_replay"

    /// The projection's tables, unqualified, as listed by the projection.
    let tables: [String]
    /// The schema the live tables are in (where the unqualified names resolve).
    let liveSchema: String

    /// Storage parameters a copy is built with, whatever its live table has: no autovacuum (nor autoanalyze)
    /// of a copy, or of its TOAST table, while it fills; the run analyzes each copy itself once it is loaded.
    /// The bulk load's inserts set one off on every large copy, taking the machine from the load, and one
    /// still running at the swap holds a lock that `ALTER TABLE … SET SCHEMA` waits for. PostgreSQL cancels
    /// an autovacuum in the way only after `deadlock_timeout` (1 s), longer than the swap's lock wait: 20 of
    /// the 50 failed attempts of a replay of a 7.7-million-event log that gave up. The swap gives each copy
    /// its live table's switches back (``restoreAutovacuum(on:)``).
    static let copyOptions = ["autovacuum_enabled": "off", "toast.autovacuum_enabled": "off"]

    /// The storage parameters (`name=value`) of the table `c` (an alias of `pg_class`) and, prefixed `toast.`,
    /// of its TOAST table `t` (`pg_class` joined on `c.reltoastrelid`): a `text[]`.
    private static func allOptions(_ c: String, toast t: String) -> String {
        "\(c).reloptions || ARRAY(SELECT 'toast.' || o FROM unnest(\(t).reloptions) o)"
    }

    /// ``allOptions(_:toast:)`` sorted, without ``copyOptions``' names.
    private static func storageOptions(_ c: String, toast t: String) -> String {
        """
        ARRAY(SELECT o FROM unnest(\(allOptions(c, toast: t))) AS o
              WHERE split_part(o, '=', 1) <> ALL ('{\(copyOptions.keys.sorted().joined(separator: ","))}') ORDER BY o)
        """
    }

    /// `"public"."users"`.
    func live(_ table: String) -> String { Self.quote(liveSchema) + "." + Self.quote(table) }
    /// `"tether_replay"."users"`.
    func shadow(_ table: String) -> String { Self.quote(Self.schema) + "." + Self.quote(table) }

    /// The copies first, then the live schema: unqualified names in a projection's
    /// `apply` resolve to the copies.
    var searchPath: String { Self.quote(Self.schema) + ", " + Self.quote(liveSchema) }

    /// Single-quotes a literal for the few statements that take no parameters.
    static func literal(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    }

    /// Double-quotes an identifier chosen by code or read from the catalog.
    static func quote(_ identifier: String) -> String {
        "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Drops copies a run interrupted without cleaning up (a killed process).
    static func dropLeftovers(on connection: PostgresConnection) async throws {
        try await connection.execute(simple: "DROP SCHEMA IF EXISTS \(quote(schema)) CASCADE")
    }

    /// Finds the live tables and checks that replay can take their place.
    static func locate(_ tables: [String], on connection: PostgresConnection) async throws -> ShadowTables {
        let rows = try await connection.query("""
            SELECT t.name, n.nspname AS schema, pg_has_role(current_user, c.relowner, 'USAGE') AS owned, current_user AS role
            FROM unnest(\(PostgresArray(tables))::text[]) AS t(name)
            LEFT JOIN pg_class c ON c.oid = to_regclass(quote_ident(t.name))
            LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
            """)
        var schemas = Set<String>()
        for row in rows {
            let name: String = try row.decode("name")
            guard let schema: String = try row.decode("schema") else {
                throw ReplayError("table \(name) does not exist: run tether migrate first")
            }
            guard try row.decode("owned", as: Bool.self) else {
                let role: String = try row.decode("role")
                throw ReplayError(
                    "replay must run as the role that owns the tables (the one tether migrate uses), not \(role)")
            }
            schemas.insert(schema)
        }
        guard schemas.count == 1, let liveSchema = schemas.first else {
            throw ReplayError("a projection's tables must share one schema; found \(schemas.sorted().joined(separator: ", "))")
        }
        guard liveSchema != schema else { throw ReplayError("the live tables resolve to the shadow schema \(schema)") }
        let shadow = ShadowTables(tables: tables, liveSchema: liveSchema)
        try await shadow.checkSwappable(on: connection)
        return shadow
    }

    /// Refuses tables the swap could not replace: objects outside the projection that
    /// depend on them (views, foreign keys from other tables) would block the drop, and
    /// a column filled from a sequence would not rebuild to the same values.
    private func checkSwappable(on connection: PostgresConnection) async throws {
        let liveNames = PostgresArray(tables.map(live))
        let blockers = try await connection.query("""
            SELECT DISTINCT pg_describe_object(d.classid, d.objid, d.objsubid) AS dependent
            FROM pg_depend d
            LEFT JOIN pg_constraint c ON d.classid = 'pg_constraint'::regclass AND c.oid = d.objid
            LEFT JOIN pg_attrdef g ON d.classid = 'pg_attrdef'::regclass AND g.oid = d.objid
            WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = ANY(\(liveNames)::regclass[]) AND d.deptype = 'n'
              AND NOT coalesce(c.conrelid = ANY(\(liveNames)::regclass[]), false)
              -- A generated column's expression depends on its own table's columns; the copy regenerates it.
              AND NOT coalesce(g.adrelid = d.refobjid, false)
            ORDER BY 1
            """)
        if let first = blockers.first {
            throw ReplayError(
                "\(try first.decode("dependent", as: String.self)) depends on a table of the projection; "
                    + "replay cannot swap the table under it (make it part of the projection or drop it)")
        }
        let sequenced = try await connection.query("""
            SELECT a.attrelid::regclass::text AS table_name, a.attname
            FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE a.attrelid = ANY(\(liveNames)::regclass[]) AND a.attnum > 0 AND NOT a.attisdropped
              AND (a.attidentity <> '' OR pg_get_expr(d.adbin, d.adrelid) LIKE '%nextval(%')
            """)
        if let first = sequenced.first {
            throw ReplayError(
                "\(try first.decode("table_name", as: String.self)).\(try first.decode("attname", as: String.self)) "
                    + "is filled from a sequence; projection tables must take every value from events")
        }
    }

    /// Creates the shadow schema and an empty copy of every table (one transaction).
    ///
    /// With `deferringKeys`, the copies get their columns, defaults, checks, grants and options only:
    /// rows loaded in bulk then go in without index upkeep or a foreign-key check each, and
    /// ``addKeys(on:)`` builds the keys, indexes and foreign keys over them afterwards.
    func create(deferringKeys: Bool = false, on connection: PostgresConnection) async throws {
        try await connection.withTransaction { connection in
            try await connection.execute(simple: "CREATE SCHEMA \(Self.quote(Self.schema))")
            for table in tables {
                try await copy(table, on: connection)
            }
            if !deferringKeys { try await addKeys(on: connection) }
        }
    }

    /// Gives the copies the live tables' primary, unique and exclusion keys, their other indexes and
    /// their foreign keys (each checked over the rows already there), in the caller's transaction.
    func addKeys(on connection: PostgresConnection) async throws {
        for table in tables {
            try await addKeys(of: table, on: connection)
        }
        try await addForeignKeys(on: connection)
    }

    /// Gives the copies the live tables' foreign keys, each checked over the rows already there, once
    /// every copy has its keys.
    func addForeignKeys(on connection: PostgresConnection) async throws {
        // Resolved with the copies first on the search path.
        let foreignKeys = try await connection.query("""
            SELECT c.relname AS table_name, k.conname, pg_get_constraintdef(k.oid) AS definition
            FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
            WHERE k.contype = 'f' AND k.conrelid = ANY(\(PostgresArray(tables.map(live)))::regclass[])
            ORDER BY c.relname, k.conname
            """)
        try await Self.withSearchPath(searchPath, on: connection) {
            for row in foreignKeys {
                try await connection.execute(simple: """
                    ALTER TABLE \(shadow(try row.decode("table_name"))) ADD CONSTRAINT \(Self.quote(try row.decode("conname"))) \
                    \(try row.decode("definition", as: String.self))
                    """)
            }
        }
    }

    private func copy(_ table: String, on connection: PostgresConnection) async throws {
        try await connection.execute(simple: """
            CREATE TABLE \(shadow(table)) (LIKE \(live(table)) INCLUDING DEFAULTS INCLUDING CONSTRAINTS \
            INCLUDING GENERATED INCLUDING STORAGE INCLUDING COMMENTS INCLUDING COMPRESSION)
            """)
        let grants = try await connection.query("""
            SELECT a.privilege_type, a.is_grantable,
                   CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END AS grantee
            FROM pg_class c, aclexplode(c.relacl) a
            WHERE c.oid = \(live(table))::regclass AND a.grantee <> c.relowner
            ORDER BY 3, 1
            """)
        for row in grants {
            let option = try row.decode("is_grantable", as: Bool.self) ? " WITH GRANT OPTION" : ""
            try await connection.execute(simple: """
                GRANT \(try row.decode("privilege_type", as: String.self)) ON \(shadow(table)) \
                TO \(try row.decode("grantee", as: String.self))\(option)
                """)
        }
        let liveOptions: String = try await connection.query("""
            SELECT array_to_string(\(unsafeSQL: Self.storageOptions("c", toast: "t")), ', ') AS options
            FROM pg_class c LEFT JOIN pg_class t ON t.oid = c.reltoastrelid WHERE c.oid = \(live(table))::regclass
            """)[0].decode("options")
        let options = (liveOptions.isEmpty ? [] : [liveOptions]) + Self.copyOptions.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }
        try await connection.execute(simple: "ALTER TABLE \(shadow(table)) SET (\(options.joined(separator: ", ")))")
    }

    /// Gives every copy its live table's settings of ``copyOptions``' parameters (set or not), in the swap's
    /// transaction, before it takes the gate: two round trips, whatever the number of tables.
    func restoreAutovacuum(on connection: PostgresConnection) async throws {
        let rows = try await connection.query("""
            SELECT n.name, s.option, s.value
            FROM unnest(\(PostgresArray(tables))::text[]) AS n(name)
            JOIN pg_class c ON c.oid = format('%I.%I', \(liveSchema)::text, n.name)::regclass
            LEFT JOIN pg_class t ON t.oid = c.reltoastrelid
            CROSS JOIN LATERAL (
                SELECT split_part(o, '=', 1) AS option, substr(o, strpos(o, '=') + 1) AS value
                FROM unnest(\(unsafeSQL: Self.allOptions("c", toast: "t"))) AS o
            ) AS s
            WHERE s.option = ANY(\(PostgresArray(Self.copyOptions.keys.sorted()))::text[])
            """)
        var liveSettings: [String: [String: String]] = [:]
        for row in rows {
            liveSettings[try row.decode("name"), default: [:]][try row.decode("option")] = try row.decode("value")
        }
        let statements = tables.map { table in
            let changes = Self.copyOptions.keys.sorted().map { option in
                liveSettings[table]?[option].map { "SET (\(option) = \(Self.literal($0)))" } ?? "RESET (\(option))"
            }
            return "ALTER TABLE \(shadow(table)) \(changes.joined(separator: ", "))"
        }
        try await connection.execute(simple: statements.joined(separator: ";\n"))
    }

    /// Gives the copy of `table` its live table's primary, unique and exclusion keys and its other
    /// indexes, built over the rows already there. Copies of different tables can be keyed side by
    /// side, each on a connection of its own; foreign keys wait for all of them (``addForeignKeys(on:)``).
    func addKeys(of table: String, on connection: PostgresConnection) async throws {
        let constraints = try await connection.query("""
            SELECT conname, pg_get_constraintdef(oid) AS definition FROM pg_constraint
            WHERE conrelid = \(live(table))::regclass AND contype IN ('p', 'u', 'x') ORDER BY conname
            """)
        for row in constraints {
            try await connection.execute(simple: """
                ALTER TABLE \(shadow(table)) ADD CONSTRAINT \(Self.quote(try row.decode("conname"))) \
                \(try row.decode("definition", as: String.self))
                """)
        }
        // pg_get_indexdef always names the table schema-qualified: point it at the copy.
        let indexes = try await connection.query("""
            SELECT pg_get_indexdef(i.indexrelid) AS definition, \(printedName(table, in: liveSchema)) AS printed
            FROM pg_index i
            WHERE i.indrelid = \(live(table))::regclass
              AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.conrelid = i.indrelid)
            ORDER BY i.indexrelid::regclass::text
            """)
        for row in indexes {
            let definition: String = try row.decode("definition")
            let target = " ON \(try row.decode("printed", as: String.self)) USING "
            guard let range = definition.range(of: target) else {
                throw ReplayError("cannot copy index of \(table): unexpected definition \(definition)")
            }
            try await connection.execute(simple: definition.replacingCharacters(in: range, with: " ON \(shadow(table)) USING "))
        }
    }

    /// The columns of the copy of `table`, in their order.
    func columns(of table: String, on connection: PostgresConnection) async throws -> [String] {
        try await Self.columns(of: shadow(table), on: connection)
    }

    /// The columns of the table `qualified` names, in their order.
    static func columns(of qualified: String, on connection: PostgresConnection) async throws -> [String] {
        try await connection.query("""
            SELECT attname FROM pg_attribute
            WHERE attrelid = \(qualified)::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum
            """).map { try $0.decode("attname") }
    }

    /// Refuses to continue when a copy differs from its live table in any way the
    /// fingerprint sees.
    ///
    /// `includingKeys: false` leaves out keys, indexes and foreign keys, for copies made with
    /// `deferringKeys` before ``addKeys(on:)``: what the bulk load cannot fix is refused before it runs.
    func verifyShapes(includingKeys: Bool = true, on connection: PostgresConnection) async throws {
        func kept(_ line: String) -> Bool {
            if includingKeys { return true }
            if line.hasPrefix("index ") { return false }
            guard line.hasPrefix("constraint ") else { return true }
            let kind = line.split(separator: " ", maxSplits: 3).dropFirst(2).first
            return !["p", "u", "f", "x"].contains(kind.map(String.init) ?? "")
        }
        for table in tables {
            let shapes = try await shapes(of: table, on: connection)
            let (live, copy) = (shapes.live.filter(kept), shapes.copy.filter(kept))
            if let difference = zip(live + [""], copy + [""]).first(where: { $0 != $1 }) {
                throw ReplayError(
                    "cannot reproduce table \(table) exactly (live: \(difference.0.isEmpty ? "nothing" : difference.0); "
                        + "copy: \(difference.1.isEmpty ? "nothing" : difference.1))")
            }
        }
    }

    /// The table's name as `pg_get_indexdef` and `pg_get_triggerdef` print it: qualified,
    /// each part quoted only where it must be.
    private func printedName(_ table: String, in schema: String) -> PostgresQuery {
        "(quote_ident(\(schema)) || '.' || quote_ident(\(table)))"
    }

    /// Fingerprints of a live table and of its copy.
    func shapes(of table: String, on connection: PostgresConnection) async throws -> (live: [String], copy: [String]) {
        (try await shape(of: table, in: liveSchema, searchPath: Self.quote(liveSchema), on: connection),
         try await shape(of: table, in: Self.schema, searchPath: searchPath, on: connection))
    }

    /// A description of a table's shape that is equal for two tables in different
    /// schemas exactly when they are built alike (names included).
    ///
    /// Definitions are printed with the table's own schema first on the search path, and
    /// the live schema after it, so a foreign key to a table of the same schema prints
    /// unqualified for the live table and its copy alike.
    private func shape(
        of table: String, in schema: String, searchPath: String, on connection: PostgresConnection
    ) async throws -> [String] {
        let qualified = Self.quote(schema) + "." + Self.quote(table)
        let printed = printedName(table, in: schema)
        return try await Self.withSearchPath(searchPath, on: connection) {
            let rows = try await connection.query("""
                SELECT 'table ' || c.relkind::text || ' ' || c.relpersistence::text || ' rls=' || c.relrowsecurity::text
                       || ' options=' || array_to_string(\(unsafeSQL: Self.storageOptions("c", toast: "t")), ',')
                       || ' acl=' || coalesce(c.relacl::text, '')
                       AS line, 0 AS part, '' AS sort
                FROM pg_class c LEFT JOIN pg_class t ON t.oid = c.reltoastrelid WHERE c.oid = \(qualified)::regclass
                UNION ALL
                SELECT format('column %s %s notnull=%s default=%s generated=%s identity=%s collation=%s storage=%s compression=%s acl=%s',
                              a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid),
                              a.attgenerated, a.attidentity, a.attcollation, a.attstorage, a.attcompression, a.attacl),
                       1, lpad(a.attnum::text, 5, '0')
                FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                WHERE a.attrelid = \(qualified)::regclass AND a.attnum > 0 AND NOT a.attisdropped
                UNION ALL
                SELECT format('constraint %s %s %s deferrable=%s', k.conname, k.contype, pg_get_constraintdef(k.oid), k.condeferrable),
                       2, k.conname
                FROM pg_constraint k WHERE k.conrelid = \(qualified)::regclass
                UNION ALL
                SELECT 'index ' || replace(pg_get_indexdef(i.indexrelid), ' ON ' || \(printed) || ' ', ' ON <table> '),
                       3, i.indexrelid::regclass::text
                FROM pg_index i WHERE i.indrelid = \(qualified)::regclass
                UNION ALL
                SELECT 'trigger ' || t.tgname || ' ' || replace(pg_get_triggerdef(t.oid), \(printed), '<table>'), 4, t.tgname
                FROM pg_trigger t WHERE t.tgrelid = \(qualified)::regclass AND NOT t.tgisinternal
                UNION ALL
                SELECT 'policy ' || p.polname, 5, p.polname FROM pg_policy p WHERE p.polrelid = \(qualified)::regclass
                ORDER BY part, sort
                """)
            return try rows.map { try $0.decode("line") }
        }
    }

    /// Runs `body` with `search_path` set to `path`, restoring the previous one after.
    static func withSearchPath<T>(
        _ path: String, on connection: PostgresConnection, isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws -> T
    ) async throws -> T {
        let previous: String = try await connection.query("SELECT current_setting('search_path') AS path")[0].decode("path")
        return try await connection.around(
            "SELECT set_config('search_path', \(path), false)", "SELECT set_config('search_path', \(previous), false)", body)
    }

    /// Replaces the live tables with the copies inside the caller's transaction, which
    /// holds the ``ProjectionGate`` and an `ACCESS EXCLUSIVE` lock on every live table.
    func swap(on connection: PostgresConnection) async throws {
        try await connection.execute(simple: "DROP TABLE \(tables.map(live).joined(separator: ", "))")
        for table in tables {
            try await connection.execute(simple: "ALTER TABLE \(shadow(table)) SET SCHEMA \(Self.quote(liveSchema))")
        }
        try await connection.execute(simple: "DROP SCHEMA \(Self.quote(Self.schema))")
    }

    /// `LOCK TABLE` statement for every live table in `mode`.
    func lockLiveTables(_ mode: String, on connection: PostgresConnection) async throws {
        try await connection.execute(simple: "LOCK TABLE \(tables.map(live).joined(separator: ", ")) IN \(mode) MODE")
    }
}
