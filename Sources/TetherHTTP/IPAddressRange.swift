import Glibc

/// An IPv4 or IPv6 address range in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`), or one address
/// (`/32`, `/128`). IPv4 addresses are compared as their IPv4-mapped IPv6 form, so `::ffff:10.0.0.1`
/// is in `10.0.0.0/8`.
public struct IPAddressRange: Sendable, Hashable, CustomStringConvertible {
    /// The first address of the range, as 16 bytes.
    let network: [UInt8]
    /// How many leading bits an address must share with `network`.
    let prefixLength: Int
    public let description: String
    /// Whether the text names an address inside its range rather than the range's first (`10.0.0.1/8`): most
    /// likely a slip for the one address, though it stands for the whole range.
    public let hasHostBits: Bool

    /// Parses `text`; nil when it is neither an address nor `address/length` with a length that fits.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard let parsed = Self.bytes(of: parts[0]) else { return nil }
        let isV4 = Self.isIPv4(parts[0])
        var length = 128
        if parts.count == 2 {
            guard let given = Int(parts[1]), given >= 0, given <= (isV4 ? 32 : 128) else { return nil }
            length = isV4 ? given + 96 : given
        }
        network = Self.masked(parsed, to: length)
        prefixLength = length
        description = text
        hasHostBits = network != parsed
    }

    /// Whether `address` (IPv4 or IPv6 text) lies in the range.
    public func contains(_ address: String) -> Bool {
        guard let bytes = Self.bytes(of: address) else { return false }
        return Self.masked(bytes, to: prefixLength) == network
    }

    /// What per-address limits count `address` as: itself for IPv4 (also IPv4-mapped), its /64 for IPv6,
    /// since one subscriber usually holds a whole /64 and could otherwise take a fresh address per try.
    public static func limitKey(for address: String) -> String {
        guard !isIPv4(address), var bytes = bytes(of: address) else { return address }
        if bytes[0..<12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff][...] {
            return "\(bytes[12]).\(bytes[13]).\(bytes[14]).\(bytes[15])"
        }
        bytes = masked(bytes, to: 64)
        var raw = in6_addr()
        withUnsafeMutableBytes(of: &raw) { $0.copyBytes(from: bytes) }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &raw, &text, socklen_t(text.count)) != nil else { return address }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/64"
    }

    private static func isIPv4(_ text: String) -> Bool {
        var v4 = in_addr()
        return inet_pton(AF_INET, text, &v4) == 1
    }

    /// The address as 16 bytes (IPv4 as IPv4-mapped IPv6), or nil.
    private static func bytes(of text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] + withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        return withUnsafeBytes(of: &v6) { Array($0) }
    }

    private static func masked(_ bytes: [UInt8], to length: Int) -> [UInt8] {
        bytes.enumerated().map { index, byte in
            let kept = max(0, min(8, length - index * 8))
            return kept == 8 ? byte : kept == 0 ? 0 : byte & UInt8(0xff << (8 - kept) & 0xff)
        }
    }
}
