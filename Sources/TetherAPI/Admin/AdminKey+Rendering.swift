import Foundation
import TetherCore
import TetherHTTP

extension AdminKey {
    /// `{"id","name","role","createdAt","revokedAt","lastUsedAt"}`, as `tether admin-keys list --json` prints it.
    public var json: JSONValue {
        [
            "id": .string(id.lowercasedText),
            "name": name.map(JSONValue.string) ?? .null,
            "role": .string(role.rawValue),
            "createdAt": .string(ISO8601Milliseconds.format(createdAt)),
            "revokedAt": revokedAt.map { .string(ISO8601Milliseconds.format($0)) } ?? .null,
            "lastUsedAt": lastUsedAt.map { .string(ISO8601Milliseconds.format($0)) } ?? .null,
        ]
    }
}

/// `tether admin-keys list`: one aligned line per key, oldest first.
public enum AdminKeyTable {
    public static let columns = ["ID", "ROLE", "NAME", "CREATED", "LAST USED", "REVOKED"]

    public static func render(_ keys: [AdminKey]) -> String {
        guard !keys.isEmpty else { return "no admin keys (make one with tether admin-keys create --role support)\n" }
        return TextTable.render(columns: columns, rows: keys.map { key in
            [
                key.id.lowercasedText, key.role.rawValue, key.name ?? "-", ISO8601Milliseconds.format(key.createdAt),
                key.lastUsedAt.map(ISO8601Milliseconds.format) ?? "never", key.revokedAt.map(ISO8601Milliseconds.format) ?? "-",
            ]
        })
    }
}
