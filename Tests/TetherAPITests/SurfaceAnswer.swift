import Foundation
import TetherCore
import TetherTesting

/// A response of a compatible surface (Parse, Firebase), its body read as a JSON object.
struct SurfaceAnswer: Sendable {
    let response: HTTPTestClient.Response
    init(_ response: HTTPTestClient.Response) { self.response = response }

    var status: Int { response.status }
    var text: String { response.bodyText }

    /// The body's members (empty when the body is not a JSON object).
    var body: [String: JSONValue] {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(response.body)), case .object(let members) = value else {
            return [:]
        }
        return members
    }

    func string(_ name: String) -> String? {
        if case .string(let text)? = body[name] { text } else { nil }
    }

    func header(_ name: String) -> String? { response.headers.values(for: name).first }
}

extension DevService {
    /// The token member `name` of a credential minted by the dev identity provider.
    func token(_ name: String, of credential: Credential) throws -> String {
        guard case .object(let members) = credential.credential, case .string(let token)? = members[name] else {
            throw HarnessError("the credential has no \(name)")
        }
        return token
    }
}
