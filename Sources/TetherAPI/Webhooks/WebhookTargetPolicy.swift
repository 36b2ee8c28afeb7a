import Foundation
#if canImport(Glibc)
import Glibc
#endif
import TetherCore

/// Where webhooks may be sent, so that an admin key cannot aim the server at its own network.
///
/// A target is an `https` URL (`http` too with `TETHER_WEBHOOK_ALLOW_HTTP=1`, or under `tether dev`)
/// whose host resolves only to public addresses: loopback, link-local, private, shared (CGNAT),
/// multicast and unspecified ranges are refused unless the host is listed in
/// `TETHER_WEBHOOK_ALLOWED_HOSTS` (`tether dev` also allows loopback). The check runs when a
/// subscription is made and again before every delivery, since what a name resolves to can change.
public struct WebhookTargetPolicy: Sendable {
    public var allowsHTTP: Bool
    public var allowedHosts: Set<String>
    public var allowsLoopback: Bool

    public init(allowsHTTP: Bool, allowedHosts: Set<String>, allowsLoopback: Bool = false) {
        self.allowsHTTP = allowsHTTP
        self.allowedHosts = Set(allowedHosts.map { $0.lowercased() })
        self.allowsLoopback = allowsLoopback
    }

    /// Why a target is refused, in a sentence for the admin who named it.
    public struct Refusal: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// A target that passed: its URL, and the addresses its host resolved to when checked, which a delivery
    /// connects to and nothing else (empty for a host listed in `TETHER_WEBHOOK_ALLOWED_HOSTS`, which is trusted
    /// wherever it resolves). Without them, a name resolving to a public address for the check and to an internal
    /// one a moment later (DNS rebinding) would aim the delivery at the server's own network.
    public struct Target: Sendable {
        public var url: URL
        public var addresses: [String]
    }

    /// Checks `text` as a target; answers its URL and the addresses checked.
    public func check(_ text: String) async throws(Refusal) -> Target {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(), !host.isEmpty else {
            throw Refusal(description: "'\(text)' is not an absolute URL.")
        }
        guard scheme == "https" || (scheme == "http" && allowsHTTP) else {
            throw Refusal(description: "webhook targets must be https (TETHER_WEBHOOK_ALLOW_HTTP=1 allows http).")
        }
        guard url.user == nil, url.password == nil else { throw Refusal(description: "a webhook URL may not carry credentials.") }
        if let port = url.port, !(1...65535).contains(port) {
            throw Refusal(description: "'\(text)' names port \(port): a port is 1 to 65535.")
        }
        if Self.isIPv4InAnotherForm(host) {
            throw Refusal(description: "\(host) is an IPv4 address in another form: write it as four decimal numbers (a.b.c.d).")
        }
        if allowedHosts.contains(host) { return Target(url: url, addresses: []) }
        let addresses = await Self.resolve(host)
        guard !addresses.isEmpty else { throw Refusal(description: "\(host) does not resolve.") }
        for address in addresses where !isPublic(address) {
            throw Refusal(description: "\(host) resolves to \(address.text), a private or local address; list the host in TETHER_WEBHOOK_ALLOWED_HOSTS to allow it.")
        }
        // A literal address is never looked up again, so there is nothing to pin (and libcurl cannot read a pin
        // keyed by an IPv6 literal).
        let isLiteral = addresses.count == 1 && (host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." })
        return Target(url: url, addresses: isLiteral ? [] : addresses.map(\.text).sorted())
    }

    /// Whether `host` is an IPv4 address written other than as four decimal numbers (`127.1`, `2130706433`,
    /// `0x7f000001`, `017700000001`): the resolver reads it as one, and libcurl writes it back as a dotted quad, a
    /// host other than the URL's, so a delivery to it would be refused every time. A name's last label is never
    /// a number, so a host whose last label is one is an address.
    static func isIPv4InAnotherForm(_ host: String) -> Bool {
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        func isNumber(_ label: Substring) -> Bool {
            let hex = label.hasPrefix("0x") ? label.dropFirst(2) : nil
            return hex.map { $0.allSatisfy(\.isHexDigit) } ?? (!label.isEmpty && label.allSatisfy { $0.isASCII && $0.isNumber })
        }
        guard let last = labels.last, isNumber(last) else { return false }
        let isDecimalOctet = { (label: Substring) in
            label.allSatisfy { $0.isASCII && $0.isNumber } && (label == "0" || !label.hasPrefix("0")) && (Int(label).map { $0 <= 255 } ?? false)
        }
        return !(labels.count == 4 && labels.allSatisfy(isDecimalOctet))
    }

    /// An address a name resolved to.
    struct Address: Sendable, Hashable {
        var bytes: [UInt8]
        var text: String {
            if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
            return stride(from: 0, to: bytes.count, by: 2).map { String(format: "%x", Int(bytes[$0]) << 8 | Int(bytes[$0 + 1])) }.joined(separator: ":")
        }
    }

    func isPublic(_ address: Address) -> Bool {
        let b = address.bytes
        if b.count == 16 {
            if b.allSatisfy({ $0 == 0 }) { return false } // ::
            if b[0..<15].allSatisfy({ $0 == 0 }) && b[15] == 1 { return allowsLoopback } // ::1
            // Forms that carry an IPv4 address are judged as it: mapped (::ffff:0:0/96), translated
            // (::ffff:0:0:0/96, RFC 2765), compatible (::/96), NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
            if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xff && b[11] == 0xff { return isPublic(Address(bytes: Array(b[12...]))) }
            if b[0..<8].allSatisfy({ $0 == 0 }) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0 {
                return isPublic(Address(bytes: Array(b[12...])))
            }
            if b[0..<12].allSatisfy({ $0 == 0 }) { return isPublic(Address(bytes: Array(b[12...]))) }
            if b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4..<12].allSatisfy({ $0 == 0 }) {
                return isPublic(Address(bytes: Array(b[12...])))
            }
            if b[0] == 0x20 && b[1] == 0x02 { return isPublic(Address(bytes: Array(b[2..<6]))) }
            // Local-use NAT64 (64:ff9b:1::/48, RFC 8215): the IPv4 address sits where the operator's prefix
            // length puts it, and the translator is local by definition; refused whole.
            if b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0 && b[5] == 1 { return false }
            if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0 { return false } // Teredo (2001::/32): an IPv4 address in disguise
            if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8 { return false } // documentation (2001:db8::/32)
            if b[0] == 0x3f && b[1] == 0xff && b[2] & 0xf0 == 0 { return false } // documentation (3fff::/20)
            if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0x02 && b[4] == 0 && b[5] == 0 { return false } // benchmarking (2001:2::/48)
            if b[0] == 0x01 && b[1] == 0 && b[2..<8].allSatisfy({ $0 == 0 }) { return false } // discard-only (100::/64)
            if b[0] & 0xfe == 0xfc { return false } // fc00::/7 unique local
            if b[0] == 0xfe && b[1] & 0xc0 == 0x80 { return false } // fe80::/10 link-local
            if b[0] == 0xfe && b[1] & 0xc0 == 0xc0 { return false } // fec0::/10 site-local
            if b[0] == 0xff { return false } // multicast
            return true
        }
        guard b.count == 4 else { return false }
        switch (b[0], b[1]) {
        case (127, _): return allowsLoopback
        case (0, _), (10, _), (169, 254), (192, 168): return false
        case (192, 0) where b[2] == 0: return false // IETF protocol assignments (192.0.0.0/24)
        case (192, 0) where b[2] == 2, (198, 51) where b[2] == 100, (203, 0) where b[2] == 113: return false // documentation
        case (198, 18), (198, 19): return false // benchmarking (198.18.0.0/15)
        case (172, 16...31): return false
        case (100, 64...127): return false // shared address space (RFC 6598)
        case (224...255, _): return false // multicast, reserved, broadcast
        default: return true
        }
    }

    /// Every address `host` resolves to (a literal address resolves to itself); off the cooperative pool.
    static func resolve(_ host: String) async -> [Address] {
        let name = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return (try? await BlockingWork.run { () -> [Address] in
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(name, nil, &hints, &list) == 0 else { return [] }
            defer { freeaddrinfo(list) }
            var found: [Address] = []
            var entry = list
            while let current = entry {
                if let socketAddress = current.pointee.ai_addr {
                    if current.pointee.ai_family == AF_INET {
                        socketAddress.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { ipv4 in
                            withUnsafeBytes(of: ipv4.pointee.sin_addr) { found.append(Address(bytes: Array($0))) }
                        }
                    } else if current.pointee.ai_family == AF_INET6 {
                        socketAddress.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { ipv6 in
                            withUnsafeBytes(of: ipv6.pointee.sin6_addr) { found.append(Address(bytes: Array($0))) }
                        }
                    }
                }
                entry = current.pointee.ai_next
            }
            return Array(Set(found))
        }) ?? []
    }
}
