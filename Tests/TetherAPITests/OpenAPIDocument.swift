import Foundation

/// What the contract tests read from `schema/openapi.yaml`: operations, problem codes and references.
///
/// The `paths:` section is read strictly: a path must start with `/`, and a
/// path item may hold only operations (`get`, `post`, …) and the fields
/// `summary`, `description`, `parameters` and `servers`. Anything else (a
/// `$ref` path item, a misspelt method) is an error naming its line, so a
/// route can never hide from the comparison with the server.
struct OpenAPIDocument {
    /// One operation: a method under a path.
    struct Operation {
        /// Uppercased, as the router registers it.
        var method: String
        var path: String
        /// The line of the method's key.
        var line: Int
        var summary: String?
        var description: String?
        /// The keys under `responses` (`200`, `default`).
        var responses: [String]
        /// Parameter objects of the path item and of the operation, `$ref`s not yet resolved.
        var parameters: [YAMLNode]
        /// Whether it describes a request body.
        var takesBody: Bool

        /// `POST /v1/sign-in`.
        var route: String { "\(method) \(path)" }
    }

    /// Why the document does not have the shape this reader knows.
    struct ShapeError: Error, CustomStringConvertible {
        var line: Int
        var message: String

        var description: String { "schema/openapi.yaml line \(line): \(message)" }
    }

    /// The operation keys of a path item (OpenAPI 3.1 §4.8.9).
    static let methods: Set<String> = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]
    /// The other fields a path item may have here; `$ref` is left out on purpose.
    static let pathItemFields: Set<String> = ["summary", "description", "parameters", "servers"]

    let root: YAMLNode
    let operations: [Operation]

    /// Reads `text`; throws ``YAMLSubsetError`` or ``ShapeError`` on anything it does not understand.
    init(yaml text: String) throws {
        root = try YAMLSubset.parse(text)
        operations = try Self.operations(in: root)
    }

    private static func operations(in root: YAMLNode) throws(ShapeError) -> [Operation] {
        guard let paths = root.entries?.first(where: { $0.key == "paths" }) else {
            throw ShapeError(line: 1, message: "no top-level 'paths:' mapping")
        }
        guard let pathItems = paths.value.entries else {
            throw ShapeError(line: paths.line, message: "'paths' is not a mapping of paths")
        }
        var operations: [Operation] = []
        for pathItem in pathItems {
            guard pathItem.key.hasPrefix("/") else {
                throw ShapeError(line: pathItem.line, message: "path '\(pathItem.key)' does not start with '/'")
            }
            guard let fields = pathItem.value.entries else {
                throw ShapeError(line: pathItem.line, message: "path item '\(pathItem.key)' is not a mapping")
            }
            let shared = try parameters(of: pathItem.value, at: pathItem)
            for field in fields {
                if Self.pathItemFields.contains(field.key) {
                    continue
                }
                guard Self.methods.contains(field.key) else {
                    throw ShapeError(
                        line: field.line,
                        message: "'\(field.key)' under \(pathItem.key) is neither an operation (\(Self.methods.sorted().joined(separator: ", "))) "
                            + "nor one of \(Self.pathItemFields.sorted().joined(separator: ", "))")
                }
                guard field.value.entries != nil else {
                    throw ShapeError(line: field.line, message: "operation \(field.key) \(pathItem.key) is not a mapping")
                }
                guard let responses = field.value["responses"]?.entries else {
                    throw ShapeError(line: field.line, message: "operation \(field.key) \(pathItem.key) has no 'responses' mapping")
                }
                operations.append(Operation(
                    method: field.key.uppercased(), path: pathItem.key, line: field.line,
                    summary: field.value["summary"]?.scalar, description: field.value["description"]?.scalar,
                    responses: responses.map(\.key), parameters: shared + (try parameters(of: field.value, at: field)),
                    takesBody: field.value["requestBody"] != nil))
            }
        }
        return operations
    }

    private static func parameters(of node: YAMLNode, at entry: YAMLEntry) throws(ShapeError) -> [YAMLNode] {
        guard let parameters = node["parameters"] else { return [] }
        guard let items = parameters.items else {
            throw ShapeError(line: entry.line, message: "'parameters' of \(entry.key) is not a sequence")
        }
        return items
    }

    /// The values of `components.schemas.ProblemCode.enum`.
    var problemCodes: [String] {
        root["components"]?["schemas"]?["ProblemCode"]?["enum"]?.items?.compactMap(\.scalar) ?? []
    }

    /// Every code an `enum` or `const` under a `code` key allows (the narrowed problem responses).
    var codesAllowedInResponses: [(code: String, line: Int)] {
        var found: [(String, Int)] = []
        Self.walk(root) { entry in
            guard entry.key == "code" else { return }
            for constraint in [entry.value["enum"]?.items?.compactMap(\.scalar), entry.value["const"]?.scalar.map { [$0] }] {
                found += (constraint ?? []).map { ($0, entry.line) }
            }
        }
        return found
    }

    /// Every `$ref` value with its line.
    var references: [(target: String, line: Int)] {
        var found: [(String, Int)] = []
        Self.walk(root) { entry in
            if entry.key == "$ref", let target = entry.value.scalar {
                found.append((target, entry.line))
            }
        }
        return found
    }

    /// The node a local reference (`#/components/schemas/User`) points at, or nil.
    func resolve(_ reference: String) -> YAMLNode? {
        guard reference.hasPrefix("#/") else { return nil }
        var node: YAMLNode? = root
        for token in reference.dropFirst(2).split(separator: "/", omittingEmptySubsequences: false) {
            // RFC 6901: ~1 is '/', ~0 is '~'.
            let key = token.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
            node = node?[key]
        }
        return node
    }

    /// The names of the `in: path` parameters of `operation`, references resolved.
    func pathParameterNames(of operation: Operation) -> Set<String> {
        Set(operation.parameters.compactMap { parameter in
            let object = parameter["$ref"]?.scalar.flatMap(resolve) ?? parameter
            return object["in"]?.scalar == "path" ? object["name"]?.scalar : nil
        })
    }

    private static func walk(_ node: YAMLNode, _ visit: (YAMLEntry) -> Void) {
        switch node {
        case .scalar:
            return
        case .sequence(let items):
            items.forEach { walk($0, visit) }
        case .mapping(let entries):
            for entry in entries {
                visit(entry)
                walk(entry.value, visit)
            }
        }
    }
}
