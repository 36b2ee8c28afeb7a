extension PostgresQuery {
    /// Joins consecutive writes to distinct tables into one statement of data-modifying CTEs
    /// (`WITH w0 AS (…), w1 AS (…) …`), so a command's writes cost PostgreSQL fewer statements.
    ///
    /// The parts of one statement run with one snapshot and do not see each other's rows, so a
    /// write joins a statement only when no part of it touches the same table; a new statement
    /// starts otherwise, and anything but an `INSERT INTO`, `UPDATE` or `DELETE FROM` stands alone.
    /// Foreign keys between the parts are checked at the end of the statement, when all have run.
    public static func combiningWrites(_ statements: [PostgresQuery]) -> [PostgresQuery] {
        var combined: [PostgresQuery] = []
        var group: [PostgresQuery] = []
        var tables: Set<Substring> = []
        func flush() {
            if let joined = join(group) { combined.append(joined) }
            group = []
            tables = []
        }
        for statement in statements {
            guard let table = writtenTable(of: statement.sql) else {
                flush()
                combined.append(statement)
                continue
            }
            if tables.contains(table) { flush() }
            group.append(statement)
            tables.insert(table)
        }
        flush()
        return combined
    }

    /// `WITH w0 AS (first), … last` for a group; the one statement itself for a group of one.
    private static func join(_ group: [PostgresQuery]) -> PostgresQuery? {
        guard let last = group.last else { return nil }
        guard group.count > 1 else { return last }
        var joined = PostgresQuery(unsafeSQL: "WITH ")
        for (index, part) in group.dropLast().enumerated() {
            joined.append(PostgresQuery(unsafeSQL: (index == 0 ? "" : ", ") + "w\(index) AS ("))
            joined.append(part)
            joined.append(PostgresQuery(unsafeSQL: ")"))
        }
        joined.append(PostgresQuery(unsafeSQL: " "))
        joined.append(last)
        return joined
    }

    /// The table an `INSERT INTO t`, `UPDATE t` or `DELETE FROM t` statement writes; nil for any other.
    private static func writtenTable(of sql: String) -> Substring? {
        // Only the first three words matter: the rest of the statement is left unsplit.
        let words = sql.split(maxSplits: 3, whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "(" }).prefix(3)
        guard let first = words.first?.uppercased() else { return nil }
        switch first {
        case "INSERT", "DELETE":
            guard words.count == 3, ["INTO", "FROM"].contains(words[words.startIndex + 1].uppercased()) else { return nil }
            return words[words.startIndex + 2]
        case "UPDATE":
            return words.count >= 2 ? words[words.startIndex + 1] : nil
        default:
            return nil
        }
    }
}
