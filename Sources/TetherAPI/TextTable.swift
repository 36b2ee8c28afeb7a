/// Columns aligned with spaces, for the command line; the last column is not padded.
enum TextTable {
    /// The header line, then one line per row; each line ends with a line feed.
    static func render(columns: [String], rows: [[String]]) -> String {
        let lines = [columns] + rows
        let widths = columns.indices.map { column in lines.map { $0[column].count }.max() ?? 0 }
        return lines.map { cells in
            cells.enumerated().map { column, cell in
                column == cells.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }.joined(separator: "  ") + "\n"
        }.joined()
    }
}
