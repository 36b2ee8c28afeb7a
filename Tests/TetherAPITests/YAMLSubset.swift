/// A node of a YAML document read by ``YAMLSubset``.
enum YAMLNode: Equatable, Sendable {
    case scalar(String)
    case sequence([YAMLNode])
    case mapping([YAMLEntry])

    /// The value of `key` when this is a mapping that has it.
    subscript(key: String) -> YAMLNode? {
        entries?.first { $0.key == key }?.value
    }

    /// The entries in document order, when this is a mapping.
    var entries: [YAMLEntry]? {
        if case .mapping(let entries) = self { entries } else { nil }
    }

    /// The items, when this is a sequence.
    var items: [YAMLNode]? {
        if case .sequence(let items) = self { items } else { nil }
    }

    /// The text, when this is a scalar.
    var scalar: String? {
        if case .scalar(let text) = self { text } else { nil }
    }
}

/// One `key: value` of a mapping, with the line the key is on.
struct YAMLEntry: Equatable, Sendable {
    var key: String
    var line: Int
    var value: YAMLNode
}

/// Why a document is outside the subset, or not YAML at all.
struct YAMLSubsetError: Error, CustomStringConvertible {
    var line: Int
    var message: String

    var description: String { "line \(line): \(message)" }
}

/// Reads the subset of YAML that `schema/openapi.yaml` is written in, strictly.
///
/// There is no YAML library on these machines, and the contract tests must
/// never skip a part of the document they did not understand; so this reader
/// knows a small subset and refuses everything else with the line number:
///
/// - block mappings (`key: value`, keys plain or quoted, no duplicates) and
///   block sequences (`- item`, `- key: value` starting a mapping); a
///   sequence may sit at its key's indentation;
/// - one-line scalars: plain (no `: ` inside, ` #` starts a comment),
///   `'single'` (`''` for a quote) or `"double"` (`\"`, `\\`, `\/`, `\n`,
///   `\t`, `\uXXXX`);
/// - `|` and `>` block scalars with optional `-` or `+` chomping;
/// - one-line flow collections of scalars: `[a, 'b']`, `{}`, `{ k: v }`;
/// - comments, blank lines and a leading `---`.
///
/// Refused: tabs in indentation, anchors, aliases, tags, `?` keys, `<<`
/// merges, directives, several documents, a plain scalar continued on the
/// next line, multi-line quoted or flow scalars, nested flow collections,
/// block-scalar indentation indicators, and a key with nothing after it.
/// Scalars stay text: `true`, `3` and `null` are not converted.
enum YAMLSubset {
    /// The document in `text`.
    static func parse(_ text: String) throws(YAMLSubsetError) -> YAMLNode {
        var reader = Reader(text)
        return try reader.document()
    }
}

/// One line: its 1-based number, leading spaces, and the rest without a trailing `\r`.
private struct Line {
    var number: Int
    var indent: Int
    var content: Substring
    var hasTabIndent: Bool

    /// Blank or a comment: ignored outside block scalars.
    var isInsignificant: Bool { content.isEmpty || content.first == "#" }

    /// `-` alone or `- …`.
    var isSequenceItem: Bool { content == "-" || content.hasPrefix("- ") }
}

private struct Reader {
    var lines: [Line]
    var index = 0

    init(_ text: String) {
        lines = text.split(separator: "\n", omittingEmptySubsequences: false).enumerated().map { offset, raw in
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
            let leading = line.prefix { $0 == " " || $0 == "\t" }
            let content = line.dropFirst(leading.count)
            return Line(
                number: offset + 1, indent: leading.count,
                content: content.allSatisfy { $0 == " " } ? "" : content, hasTabIndent: leading.contains("\t"))
        }
    }

    mutating func document() throws(YAMLSubsetError) -> YAMLNode {
        if let tabbed = lines.first(where: { $0.hasTabIndent && !$0.content.isEmpty }) {
            throw YAMLSubsetError(line: tabbed.number, message: "a tab in the indentation (use spaces)")
        }
        if let first = peek(), first.indent == 0, first.content == "---" {
            index += 1
        }
        guard let first = peek() else { throw YAMLSubsetError(line: 1, message: "the document is empty") }
        let root = try block(minimumIndent: first.indent)
        if let extra = peek() {
            throw fail(extra, "unexpected content here; check its indentation")
        }
        return root
    }

    /// The next significant line, skipping blank and comment lines.
    mutating func peek() -> Line? {
        while index < lines.count, lines[index].isInsignificant {
            index += 1
        }
        return index < lines.count ? lines[index] : nil
    }

    /// A mapping or sequence starting at the next line, indented at least `minimumIndent`.
    mutating func block(minimumIndent: Int) throws(YAMLSubsetError) -> YAMLNode {
        guard let line = peek() else { throw YAMLSubsetError(line: lines.count, message: "a nested block is missing at the end") }
        guard line.indent >= minimumIndent else { throw fail(line, "a nested block was expected, indented further") }
        try refuseDocumentMarkers(line)
        return line.isSequenceItem ? try sequence(indent: line.indent) : try mapping(indent: line.indent)
    }

    mutating func mapping(indent: Int) throws(YAMLSubsetError) -> YAMLNode {
        var entries: [YAMLEntry] = []
        while let line = peek(), line.indent >= indent {
            guard line.indent == indent else {
                throw fail(line, "indented deeper than the key above; a plain scalar cannot go on to the next line (use | or >)")
            }
            try refuseDocumentMarkers(line)
            guard !line.isSequenceItem else { throw fail(line, "a sequence item where a mapping key was expected") }
            guard let (key, rest) = try Self.splitKey(line.content, line: line) else {
                throw fail(line, "expected 'key: value' (quote a value that holds ': ')")
            }
            guard !entries.contains(where: { $0.key == key }) else { throw fail(line, "duplicate key '\(key)'") }
            index += 1
            let node = try value(rest, of: line, indent: indent, sequenceMayShareIndent: true)
            entries.append(YAMLEntry(key: key, line: line.number, value: node))
        }
        return .mapping(entries)
    }

    mutating func sequence(indent: Int) throws(YAMLSubsetError) -> YAMLNode {
        var items: [YAMLNode] = []
        while let line = peek(), line.indent >= indent {
            guard line.indent == indent else {
                throw fail(line, "indented deeper than the item above; a plain scalar cannot go on to the next line (use | or >)")
            }
            guard line.isSequenceItem else { break } // the mapping that holds this sequence goes on
            let afterDash = line.content.dropFirst()
            let gap = afterDash.prefix { $0 == " " }.count
            let inline = afterDash.dropFirst(gap)
            if inline.isEmpty || inline.first == "#" {
                index += 1
                items.append(try block(minimumIndent: indent + 1))
            } else if try Self.splitKey(inline, line: line) != nil {
                // `- key: value` starts a mapping whose keys line up with `key`.
                lines[index].indent = indent + 1 + gap
                lines[index].content = inline
                items.append(try mapping(indent: indent + 1 + gap))
            } else {
                index += 1
                items.append(try value(inline, of: line, indent: indent, sequenceMayShareIndent: false))
            }
        }
        return .sequence(items)
    }

    /// The value written after a key or a dash (`text`, possibly empty) on `line`, whose key or dash sits at `indent`.
    mutating func value(_ text: Substring, of line: Line, indent: Int, sequenceMayShareIndent: Bool) throws(YAMLSubsetError) -> YAMLNode {
        guard let first = text.first, first != "#" else {
            guard let next = peek() else { throw fail(line, "nothing follows; write '', [] or {} for an empty value") }
            if next.indent > indent {
                return try block(minimumIndent: indent + 1)
            }
            if sequenceMayShareIndent, next.indent == indent, next.isSequenceItem {
                return try sequence(indent: indent)
            }
            throw fail(line, "nothing follows; write '', [] or {} for an empty value")
        }
        switch first {
        case "|", ">":
            return .scalar(try blockScalar(header: text, of: line, parentIndent: indent))
        case "[", "{":
            var scanner = FlowScanner(text: text, line: line)
            let node = try scanner.collection()
            try scanner.expectEnd()
            return node
        case "'", "\"":
            var scanner = FlowScanner(text: text, line: line)
            let scalar = try scanner.quoted()
            try scanner.expectEnd()
            return .scalar(scalar)
        default:
            return .scalar(try Self.plain(text, line: line))
        }
    }

    /// The text of a `|` or `>` block scalar whose header is `header`; its lines are indented deeper than `parentIndent`.
    mutating func blockScalar(header: Substring, of line: Line, parentIndent: Int) throws(YAMLSubsetError) -> String {
        let indicators = header.prefix { $0 != " " }
        let afterIndicators = header.dropFirst(indicators.count).drop { $0 == " " }
        guard ["|", "|-", "|+", ">", ">-", ">+"].contains(indicators), afterIndicators.isEmpty || afterIndicators.first == "#" else {
            throw fail(line, "block scalar header '\(header)' is not one of | |- |+ > >- >+")
        }
        let folded = indicators.first == ">"
        var body: [Substring?] = [] // nil: an empty line
        var bodyIndent: Int?
        while index < lines.count {
            let next = lines[index]
            if next.content.isEmpty {
                body.append(nil)
            } else {
                guard next.indent > parentIndent else { break }
                let expected = bodyIndent ?? next.indent
                guard !next.hasTabIndent, next.indent >= expected else {
                    throw fail(next, "less indented than the first line of its block scalar")
                }
                bodyIndent = expected
                body.append(Substring(String(repeating: " ", count: next.indent - expected)) + next.content)
            }
            index += 1
        }
        guard bodyIndent != nil else { throw fail(line, "empty block scalar") }
        var trailingEmpty = 0
        while body.last == .some(nil) {
            body.removeLast()
            trailingEmpty += 1
        }
        var text = ""
        var previous: Substring?
        var emptyRun = 0
        for entry in body {
            guard let entry else {
                emptyRun += 1
                continue
            }
            if let previous {
                if folded && emptyRun == 0 && previous.first != " " && entry.first != " " {
                    text += " "
                } else {
                    text += String(repeating: "\n", count: folded ? max(emptyRun, 1) : emptyRun + 1)
                }
            }
            text += entry
            previous = entry
            emptyRun = 0
        }
        switch indicators.last {
        case "-": return text
        case "+": return text + String(repeating: "\n", count: trailingEmpty + 1)
        default: return text + "\n"
        }
    }

    func fail(_ line: Line, _ message: String) -> YAMLSubsetError {
        YAMLSubsetError(line: line.number, message: message)
    }

    func refuseDocumentMarkers(_ line: Line) throws(YAMLSubsetError) {
        if line.indent == 0, line.content.hasPrefix("---") || line.content.hasPrefix("...") || line.content.hasPrefix("%") {
            throw fail(line, "directives and further documents are not in the subset")
        }
    }

    /// `key` and what follows its colon, or nil when `content` is not a `key:` line.
    static func splitKey(_ content: Substring, line: Line) throws(YAMLSubsetError) -> (String, Substring)? {
        let key: String
        let rest: Substring
        if content.first == "[" || content.first == "{" {
            return nil
        } else if content.first == "'" || content.first == "\"" {
            var scanner = FlowScanner(text: content, line: line)
            let quoted = try scanner.quoted()
            let after = scanner.remainder.drop { $0 == " " }
            guard after.first == ":", after.dropFirst().isEmpty || after.dropFirst().first == " " else { return nil }
            key = quoted
            rest = after.dropFirst()
        } else if let colon = content.firstRange(of: ": ") {
            key = String(content[..<colon.lowerBound])
            rest = content[colon.upperBound...]
        } else if content.hasSuffix(":") {
            key = String(content.dropLast())
            rest = ""
        } else {
            return nil
        }
        if content.first != "'" && content.first != "\"" {
            guard let first = key.first, !"[]{},&*!?|>%@`#".contains(first), !key.hasPrefix("- "), key != "<<",
                  !key.contains(" #")
            else {
                throw YAMLSubsetError(line: line.number, message: "key '\(key)' is not in the subset (quote it)")
            }
        }
        return (key, rest.drop { $0 == " " })
    }

    /// A plain one-line scalar without its trailing comment and spaces.
    static func plain(_ text: Substring, line: Line) throws(YAMLSubsetError) -> String {
        var value = text
        if let comment = value.firstRange(of: " #") {
            value = value[..<comment.lowerBound]
        }
        while value.last == " " {
            value = value.dropLast()
        }
        guard let first = value.first, !"&*!%@`],}".contains(first), !value.hasPrefix("? "), !value.hasPrefix("- ") else {
            throw YAMLSubsetError(
                line: line.number, message: "'\(value)' starts with an indicator outside the subset (anchor, alias, tag…); quote it")
        }
        guard !value.contains(": "), !value.hasSuffix(":") else {
            throw YAMLSubsetError(line: line.number, message: "'\(value)' holds ': ' or ends with ':'; quote it")
        }
        return String(value)
    }
}

/// Reads quoted scalars and one-line flow collections of scalars.
private struct FlowScanner {
    var remainder: Substring
    let line: Line

    init(text: Substring, line: Line) {
        self.remainder = text
        self.line = line
    }

    func fail(_ message: String) -> YAMLSubsetError {
        YAMLSubsetError(line: line.number, message: message)
    }

    mutating func skipSpaces() {
        remainder = remainder.drop { $0 == " " }
    }

    /// Nothing but spaces and a comment may follow.
    mutating func expectEnd() throws(YAMLSubsetError) {
        skipSpaces()
        guard remainder.isEmpty || remainder.first == "#" else {
            throw fail("unexpected '\(remainder)' after the value")
        }
    }

    /// `[scalars]` or `{key: scalar}`, on this line.
    mutating func collection() throws(YAMLSubsetError) -> YAMLNode {
        let isSequence = remainder.first == "["
        let close: Character = isSequence ? "]" : "}"
        remainder = remainder.dropFirst()
        var items: [YAMLNode] = []
        var entries: [YAMLEntry] = []
        skipSpaces()
        if remainder.first == close {
            remainder = remainder.dropFirst()
            return isSequence ? .sequence([]) : .mapping([])
        }
        while true {
            skipSpaces()
            if isSequence {
                items.append(.scalar(try scalar(stoppingAt: [",", "]"])))
            } else {
                let key = try scalar(stoppingAt: [":"])
                guard remainder.first == ":" else { throw fail("expected ':' after '\(key)' in a flow mapping") }
                remainder = remainder.dropFirst()
                skipSpaces()
                guard !entries.contains(where: { $0.key == key }) else { throw fail("duplicate key '\(key)'") }
                entries.append(YAMLEntry(key: key, line: line.number, value: .scalar(try scalar(stoppingAt: [",", "}"]))))
            }
            skipSpaces()
            guard let next = remainder.first else { throw fail("a flow collection must close on its own line") }
            remainder = remainder.dropFirst()
            if next == close { break }
            guard next == "," else { throw fail("expected ',' or '\(close)' in a flow collection, found '\(next)'") }
        }
        return isSequence ? .sequence(items) : .mapping(entries)
    }

    /// A quoted scalar, or plain text up to one of `stops`.
    mutating func scalar(stoppingAt stops: Set<Character>) throws(YAMLSubsetError) -> String {
        if remainder.first == "'" || remainder.first == "\"" {
            return try quoted()
        }
        let text = remainder.prefix { !stops.contains($0) }
        remainder = remainder.dropFirst(text.count)
        let trimmed = text.trimmingSpaces
        guard let first = trimmed.first, !"[]{}&*!|>%@`#".contains(first) else {
            throw fail("'\(trimmed)' is not a scalar this subset reads in a flow collection")
        }
        return String(trimmed)
    }

    /// A `'…'` or `"…"` scalar that ends on this line.
    mutating func quoted() throws(YAMLSubsetError) -> String {
        let quote = remainder.first!
        remainder = remainder.dropFirst()
        var text = ""
        while let character = remainder.first {
            remainder = remainder.dropFirst()
            if character == quote {
                if quote == "'", remainder.first == "'" {
                    remainder = remainder.dropFirst()
                    text.append("'")
                    continue
                }
                return text
            }
            if quote == "\"", character == "\\" {
                text.append(try escape())
            } else {
                text.append(character)
            }
        }
        throw fail("a quoted scalar must end on its own line")
    }

    mutating func escape() throws(YAMLSubsetError) -> Character {
        guard let code = remainder.first else { throw fail("a quoted scalar must end on its own line") }
        remainder = remainder.dropFirst()
        switch code {
        case "\"", "\\", "/": return code
        case "n": return "\n"
        case "t": return "\t"
        case "u":
            let digits = remainder.prefix(4)
            guard digits.count == 4, let value = UInt32(digits, radix: 16), let scalar = Unicode.Scalar(value) else {
                throw fail("\\u needs four hexadecimal digits")
            }
            remainder = remainder.dropFirst(4)
            return Character(scalar)
        default:
            throw fail("escape '\\\(code)' is not in the subset")
        }
    }
}

extension Substring {
    /// Without leading and trailing spaces.
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while text.first == " " { text = text.dropFirst() }
        while text.last == " " { text = text.dropLast() }
        return text
    }
}
