import Foundation

/// One row where a live table differs from what the log rebuilds.
public struct RowDrift: Sendable, Hashable, CustomStringConvertible {
    /// How the live row differs.
    public enum Kind: String, Sendable, Hashable {
        /// The log makes a row the live table lacks.
        case missing
        /// The live table has a row the log does not make.
        case extra
        /// Both have the row (by key), with different values.
        case changed
        /// The live row names a row of another table (``Projection/Reference``) that the live table lacks.
        case dangling
    }

    public var table: String
    public var kind: Kind
    /// The row's key columns and values (`id=…`), or the empty string for a table without a key.
    public var key: String
    /// For `changed`, each differing column with both values; otherwise the whole row as JSON.
    public var detail: String

    public init(table: String, kind: Kind, key: String, detail: String) {
        self.table = table
        self.kind = kind
        self.key = key
        self.detail = detail
    }

    /// `users (id=…) changed: display_name live 'Mallory', log 'Ada'`.
    public var description: String {
        let row = key.isEmpty ? table : "\(table) (\(key))"
        return switch kind {
        case .missing: "\(row) missing from the live table: the log has \(detail)"
        case .extra: "\(row) extra in the live table: \(detail) is not in the log"
        case .changed: "\(row) changed: \(detail)"
        case .dangling: "\(row) refers to \(detail), which is not in the live table"
        }
    }
}

extension ShadowTables {
    /// Every row where a live table and its copy differ, table by table.
    ///
    /// Rows are matched by the primary key, or else by the first unique constraint
    /// over `NOT NULL` columns (`identities` has no primary key); a table with neither
    /// is compared as a multiset of whole rows. Values compare by their text form, so
    /// a difference PostgreSQL would print differently is a difference.
    ///
    /// A table is first compared whole: its rows' count and two 64-bit folds (sum and xor) of the hashes of
    /// their rows (``rowHash(of:on:)``), live against copy, in one scan of each. Only a table whose digests
    /// differ is compared row by row.
    func drift(on connection: PostgresConnection) async throws -> [RowDrift] {
        var drift: [RowDrift] = []
        for table in tables {
            let hash = try await rowHash(of: table, on: connection)
            func digest(_ qualified: String) -> String {
                "(SELECT row(count(*), sum(h), bit_xor(h)) FROM (SELECT \(hash) AS h FROM \(qualified) t) d)"
            }
            let same: Bool = try await connection.query("""
                SELECT \(unsafeSQL: digest(live(table))) IS NOT DISTINCT FROM \(unsafeSQL: digest(shadow(table))) AS same
                """)[0].decode("same")
            if same { continue }
            let columns = try await Self.columns(of: live(table), on: connection)
            let keyRows = try await connection.query("""
                SELECT json_agg(a.attname ORDER BY u.ord)::text AS names FROM pg_constraint k
                CROSS JOIN unnest(k.conkey) WITH ORDINALITY AS u(attnum, ord)
                JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.attnum
                WHERE k.conrelid = \(live(table))::regclass AND k.contype IN ('p', 'u')
                GROUP BY k.oid, k.contype, k.conname
                HAVING bool_and(a.attnotnull)
                ORDER BY k.contype = 'p' DESC, k.conname
                LIMIT 1
                """)
            let query: PostgresQuery
            if let names: String = try keyRows.first?.decode("names") {
                query = keyedDifference(table, key: try Self.decodeNames(names), columns: columns)
            } else {
                query = multisetDifference(table)
            }
            for row in try await connection.query(query) {
                guard let kind = RowDrift.Kind(rawValue: try row.decode("kind")) else { continue }
                drift.append(RowDrift(table: table, kind: kind, key: try row.decode("key"), detail: try row.decode("detail")))
            }
        }
        return drift
    }

    /// The live rows whose reference (one of `references`) names no row, in the caller's snapshot; at most
    /// `limit` a reference. The key is the referencing column's (`user_id=…`), the detail the row referred to.
    func danglingReferences(_ references: [Projection.Reference], limit: Int = 100, on connection: PostgresConnection) async throws -> [RowDrift] {
        var drift: [RowDrift] = []
        for reference in references {
            let column = Self.quote(reference.column), referencedColumn = Self.quote(reference.referencedColumn)
            let rows = try await connection.query("""
                SELECT DISTINCT t.\(unsafeSQL: column)::text AS value FROM \(unsafeSQL: live(reference.table)) t
                WHERE t.\(unsafeSQL: column) IS NOT NULL AND NOT EXISTS (
                    SELECT 1 FROM \(unsafeSQL: live(reference.referenced)) r WHERE r.\(unsafeSQL: referencedColumn) = t.\(unsafeSQL: column))
                ORDER BY 1 LIMIT \(literal: limit)
                """)
            for row in rows {
                let value: String = try row.decode("value")
                drift.append(RowDrift(
                    table: reference.table, kind: .dangling, key: "\(reference.column)=\(value)",
                    detail: "\(reference.referenced) (\(reference.referencedColumn)=\(value))"))
            }
        }
        return drift
    }

    /// Types whose values are equal exactly when their text forms are (under a deterministic collation, for
    /// the texts): a column of one of them is hashed by value, which is several times cheaper than printing it.
    /// Not arrays: their hash leaves out their bounds, so `[0:1]={a,b}` and `{a,b}` would hash alike.
    private static let printedAsTheyCompare: Set<String> = [
        "uuid", "smallint", "integer", "bigint", "boolean", "text", "timestamp with time zone",
    ]

    /// The expression that hashes a row `t` of `table` (or of its copy, which has the same columns) for the
    /// whole-table digests: `hash_record_extended` over its columns, each by value where its type compares
    /// as it prints, by its text otherwise (`jsonb` keeps `1.0` and `1.00` apart in print only). So the
    /// digests still tell rows apart exactly where their text forms differ.
    private func rowHash(of table: String, on connection: PostgresConnection) async throws -> String {
        let columns = try await connection.query("""
            SELECT a.attname, format_type(a.atttypid, NULL) AS type,
                   coalesce((SELECT c.collisdeterministic FROM pg_collation c WHERE c.oid = a.attcollation), true) AS deterministic
            FROM pg_attribute a
            WHERE a.attrelid = \(live(table))::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
            """)
        let parts = try columns.map { row in
            let name = "t." + Self.quote(try row.decode("attname"))
            let deterministic: Bool = try row.decode("deterministic")
            let type: String = try row.decode("type")
            let byValue = deterministic && Self.printedAsTheyCompare.contains(type)
            return byValue ? name : name + "::text"
        }
        guard !parts.isEmpty else { return "hashtextextended(t::text, 0)" }
        return "hash_record_extended(row(\(parts.joined(separator: ", "))), 0)"
    }

    private static func decodeNames(_ json: String) throws -> [String] {
        try JSONDecoder().decode([String].self, from: Data(json.utf8))
    }

    private func keyedDifference(_ table: String, key: [String], columns: [String]) -> PostgresQuery {
        func column(_ side: String, _ name: String) -> String { side + "." + Self.quote(name) }
        var keyText: PostgresQuery = "concat_ws(', '"
        for name in key {
            keyText.append(", format('%s=%s', \(name)::text, coalesce(\(unsafeSQL: column("l", name)), \(unsafeSQL: column("s", name)))::text)")
        }
        keyText.append(")")
        var changes: PostgresQuery = "concat_ws('; '"
        for name in columns {
            let live = column("l", name) + "::text", log = column("s", name) + "::text"
            changes.append("""
                , CASE WHEN \(unsafeSQL: live) IS DISTINCT FROM \(unsafeSQL: log)
                  THEN format('%s live %s, log %s', \(name)::text, quote_nullable(\(unsafeSQL: live)), quote_nullable(\(unsafeSQL: log))) END
                """)
        }
        changes.append(")")
        let join = key.map { "\(column("l", $0)) = \(column("s", $0))" }.joined(separator: " AND ")
        return """
            SELECT CASE WHEN l::text IS NULL THEN 'missing' WHEN s::text IS NULL THEN 'extra' ELSE 'changed' END AS kind,
                   \(keyText) AS key,
                   CASE WHEN l::text IS NULL THEN to_jsonb(s)::text WHEN s::text IS NULL THEN to_jsonb(l)::text ELSE \(changes) END AS detail
            FROM \(unsafeSQL: live(table)) l FULL JOIN \(unsafeSQL: shadow(table)) s ON \(unsafeSQL: join)
            WHERE l::text IS DISTINCT FROM s::text
            ORDER BY 2, 1
            """
    }

    private func multisetDifference(_ table: String) -> PostgresQuery {
        """
        SELECT 'extra' AS kind, '' AS key, shown AS detail FROM (
            SELECT l::text AS exact, to_jsonb(l)::text AS shown FROM \(unsafeSQL: live(table)) l
            EXCEPT ALL SELECT s::text, to_jsonb(s)::text FROM \(unsafeSQL: shadow(table)) s) AS extra
        UNION ALL
        SELECT 'missing', '', shown FROM (
            SELECT s::text AS exact, to_jsonb(s)::text AS shown FROM \(unsafeSQL: shadow(table)) s
            EXCEPT ALL SELECT l::text, to_jsonb(l)::text FROM \(unsafeSQL: live(table)) l) AS missing
        ORDER BY 1, 3
        """
    }
}
