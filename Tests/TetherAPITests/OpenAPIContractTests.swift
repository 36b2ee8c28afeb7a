import Foundation
import Testing
import TetherAPI
import TetherCrypto
import TetherHTTP

/// Keeps `schema/openapi.yaml` and the service's routes describing the same API.
@Suite("schema/openapi.yaml matches the service")
struct OpenAPIContractTests {
    /// The repository root: Tests/TetherAPITests/<this file> is three levels down.
    private static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    private func specification() throws -> OpenAPIDocument {
        try OpenAPIDocument(yaml: String(contentsOf: Self.root.appendingPathComponent("schema/openapi.yaml"), encoding: .utf8))
    }

    /// `POST /v1/sign-in` and the like, as the real service registers them (it is assembled, never started).
    private func serviceRoutes() async throws -> Set<String> {
        let service = try TetherService(
            configuration: try TetherConfiguration(values: ["TETHER_PARSE_APP_ID": "contract", "TETHER_FIREBASE_PROJECT_ID": "contract"]),
            databaseURL: "postgresql://tether@127.0.0.1:1/never-connected",
            logger: Logger(sink: .discarding),
            passwords: ScryptPasswordHasher(parameters: .init(logN: 10, blockSize: 8, parallelism: 1)))
        let routes = service.server.routes.map { "\($0.method) \($0.pattern)" }
        await service.stop()
        return Set(routes)
    }

    @Test func everyV1ParseAndFirebaseRouteIsDescribedAndEveryDescribedOperationIsServed() async throws {
        let served = try await serviceRoutes()
        let described = Set(try specification().operations.map(\.route))
        #expect(served.contains("GET /v1/users/me"), "the service's route list is read: \(served.sorted())")

        #expect(served.contains("PUT /parse/users/{id}"), "the Parse surface is on: \(served.sorted())")
        let v1 = served.filter { route in
            route.split(separator: " ").last.map { path in
                path == "/v1" || ["/v1/", "/parse/", "/identitytoolkit.", "/securetoken.", "/www.googleapis.com/"].contains { path.hasPrefix($0) }
            } ?? false
        }
        let undescribed = v1.subtracting(described).sorted()
        let unserved = described.subtracting(served).sorted()
        #expect(undescribed.isEmpty, "routes the service registers that schema/openapi.yaml does not describe: \(undescribed.joined(separator: ", "))")
        #expect(unserved.isEmpty, "operations in schema/openapi.yaml that the service does not register: \(unserved.joined(separator: ", "))")
    }

    @Test func everyOperationSaysWhatItDoesAndHowItAnswers() throws {
        let operations = try specification().operations
        #expect(!operations.isEmpty)
        for operation in operations {
            let explained = [operation.summary, operation.description].contains { !($0 ?? "").trimmingCharacters(in: .whitespacesAndNewlines).isEmpty }
            #expect(explained, "\(operation.route) (line \(operation.line)) has neither a summary nor a description")
            #expect(!operation.responses.isEmpty, "\(operation.route) (line \(operation.line)) has no response")
        }
    }

    /// The HTTP layer answers 413 to a body over its limit before any route runs, on every surface.
    @Test func everyOperationThatTakesABodySaysItMayBeTooLarge() throws {
        let operations = try specification().operations.filter(\.takesBody)
        #expect(operations.count > 40)
        let silent = operations.filter { !$0.responses.contains("413") }.map { "\($0.route) (line \($0.line))" }
        #expect(silent.isEmpty, "operations that take a body but do not list 413: \(silent.joined(separator: ", "))")
    }

    /// API.md: every state-changing request accepts `Idempotency-Key`. The provider callbacks, which Apple's and
    /// Facebook's servers call, are the exception the document states.
    @Test func everyChangeOfTheNativeAndAdminAPIsTakesAnIdempotencyKey() throws {
        let changes = try specification().operations.filter {
            $0.path.hasPrefix("/v1/") && !$0.path.hasPrefix("/v1/providers/") && ["POST", "PUT", "PATCH", "DELETE"].contains($0.method)
        }
        #expect(changes.count > 30)
        let silent = changes.filter { operation in
            !operation.parameters.contains { $0["$ref"]?.scalar == "#/components/parameters/IdempotencyKey" }
        }.map { "\($0.route) (line \($0.line))" }
        #expect(silent.isEmpty, "changes that do not take Idempotency-Key: \(silent.joined(separator: ", "))")
    }

    @Test func theProblemCodeEnumHoldsEveryCodeOfTheContractAndNothingElseIsAnswered() throws {
        let contract = try String(contentsOf: Self.root.appendingPathComponent("../shared/API.md").standardizedFileURL, encoding: .utf8)
        let errorList = try #require(contract.range(of: "Error codes (status):"), "API.md has no 'Error codes (status):' list")
        let paragraph = contract[errorList.lowerBound...].components(separatedBy: "\n\n")[0]
        let contractCodes = paragraph.matches(of: #/`([a-z_]+)` (\d{3})/#).map { String($0.output.1) }
        #expect(contractCodes.count >= 10, "API.md's error list was read: \(contractCodes)")

        let specification = try specification()
        let enumerated = Set(specification.problemCodes)
        let missing = contractCodes.filter { !enumerated.contains($0) }
        #expect(missing.isEmpty, "API.md codes missing from components.schemas.ProblemCode.enum: \(missing.joined(separator: ", "))")

        let allowed = specification.codesAllowedInResponses
        #expect(!allowed.isEmpty)
        let unknown = allowed.filter { !enumerated.contains($0.code) }.map { "\($0.code) (line \($0.line))" }
        #expect(unknown.isEmpty, "responses allow codes that ProblemCode does not list: \(unknown.joined(separator: ", "))")
    }

    @Test func everyReferenceResolvesAndEveryPathParameterIsDeclared() throws {
        let specification = try specification()
        let references = specification.references
        #expect(!references.isEmpty)
        let dangling = references.filter { specification.resolve($0.target) == nil }.map { "\($0.target) (line \($0.line))" }
        #expect(dangling.isEmpty, "references that point at nothing: \(dangling.joined(separator: ", "))")

        for operation in specification.operations {
            let inPath = Set(operation.path.matches(of: #/\{([^}]+)\}/#).map { String($0.output.1) })
            let declared = specification.pathParameterNames(of: operation)
            #expect(declared == inPath, "\(operation.route) (line \(operation.line)) declares path parameters \(declared.sorted()), its path has \(inPath.sorted())")
        }
    }
}

@Suite("OpenAPI paths reader")
struct OpenAPIDocumentTests {
    @Test func readsTheOperationsOfEachPath() throws {
        let document = try OpenAPIDocument(yaml: """
            openapi: 3.1.0
            paths:
              /v1/things/{id}:
                parameters:
                  - name: id
                    in: path
                get:
                  summary: A thing
                  responses:
                    '200':
                      description: it
                delete:
                  description: Removes it.
                  responses:
                    '204':
                      description: gone
            """)
        #expect(document.operations.map(\.route) == ["GET /v1/things/{id}", "DELETE /v1/things/{id}"])
        #expect(document.operations.map(\.responses) == [["200"], ["204"]])
        #expect(document.operations.first.map(document.pathParameterNames) == ["id"])
    }

    @Test(arguments: [
        ("    $ref: '#/components/pathItems/Thing'\n", 4), // a referenced path item would hide its operations
        ("    gett:\n      responses:\n        '200':\n          description: x\n", 4),
        ("    get: {}\n", 4), // no responses
        ("    get:\n      summary: x\n", 4),
    ])
    func refusesAPathItemItCannotRead(pathItem: String, line: Int) throws {
        let error = #expect(throws: OpenAPIDocument.ShapeError.self) {
            _ = try OpenAPIDocument(yaml: "openapi: 3.1.0\npaths:\n  /v1/things:\n" + pathItem)
        }
        #expect(error?.line == line, "\(String(describing: error))")
    }

    @Test func refusesAPathWithoutASlash() {
        #expect(throws: OpenAPIDocument.ShapeError.self) {
            _ = try OpenAPIDocument(yaml: "paths:\n  v1/things:\n    get:\n      responses: {}\n")
        }
    }
}

@Suite("YAML subset reader")
struct YAMLSubsetTests {
    @Test func readsTheSubsetTheSpecificationUses() throws {
        let node = try YAMLSubset.parse("""
            # comment
            ---
            title: Tether   # trailing comment
            url: http://127.0.0.1:8080
            '200':
              $ref: '#/components/x'
            flow: [string, 'null', "a\\"b"]
            empty: {}
            ref: { $ref: '#/y' }
            list:
            - a
            - key: value
              other: 'it''s'
            nested:
              -
                - deep
            """)
        #expect(node["title"] == .scalar("Tether"))
        #expect(node["url"] == .scalar("http://127.0.0.1:8080"))
        #expect(node["200"]?["$ref"] == .scalar("#/components/x"))
        #expect(node["flow"] == .sequence([.scalar("string"), .scalar("null"), .scalar("a\"b")]))
        #expect(node["empty"] == .mapping([]))
        #expect(node["ref"]?["$ref"] == .scalar("#/y"))
        #expect(node["list"]?.items?.first == .scalar("a"))
        #expect(node["list"]?.items?.last?["other"] == .scalar("it's"))
        #expect(node["nested"] == .sequence([.sequence([.scalar("deep")])]))
    }

    @Test func readsBlockScalarsWithTheirChomping() throws {
        let node = try YAMLSubset.parse("""
            literal: |
              one: two
              # not a comment

              three
            folded: >-
              one
              two

              three
            next: x
            """)
        #expect(node["literal"] == .scalar("one: two\n# not a comment\n\nthree\n"))
        #expect(node["folded"] == .scalar("one two\nthree"))
        #expect(node["next"] == .scalar("x"))
    }

    @Test(arguments: [
        ("a:\n\tb: c\n", 2), // tab
        ("a: &anchor x\n", 1),
        ("a: *alias\n", 1),
        ("a: !tag x\n", 1),
        ("a: x\na: y\n", 2), // duplicate key
        ("a: plain\n  continued\n", 2),
        ("a: 'unterminated\n  quote'\n", 1),
        ("a: [x, y\n", 1),
        ("a: [x, [y]]\n", 1),
        ("a:\nb: x\n", 1), // nothing after the key
        ("a: x: y\n", 1), // would be a nested mapping
        ("a: x\n---\nb: y\n", 2), // a second document
        ("a: |2\n    x\n", 1), // indentation indicator
        ("<<: x\n", 1),
        ("- a\nb: c\n", 2),
    ])
    func refusesWhatIsOutsideTheSubset(text: String, line: Int) {
        let error = #expect(throws: YAMLSubsetError.self) {
            _ = try YAMLSubset.parse(text)
        }
        #expect(error?.line == line, "\(String(describing: error))")
    }
}
