import COpenSSL

/// The one place where TetherCrypto touches OpenSSL's error queue, fetched
/// algorithms, BIGNUM/OSSL_PARAM plumbing and memory BIOs.
enum OpenSSL {
    /// Wraps the first queued OpenSSL error into `error` and empties the queue.
    ///
    /// OpenSSL keeps errors in a thread-local queue; leaving them there makes
    /// a later, unrelated call on the same thread look like it failed.
    static func failure(_ error: CryptoError, _ operation: String) -> CryptoError {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return error.with(detail: operation) }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        let text = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return error.with(detail: "\(operation): \(text)")
    }

    /// Empties the error queue after a failure that is reported as `false`/`nil`.
    static func clearErrors() {
        ERR_clear_error()
    }

    /// A C string that lives for the whole program.
    ///
    /// `OSSL_PARAM_BLD_push_*` keeps key and value pointers until
    /// `OSSL_PARAM_BLD_to_param`; a Swift `String` bridged to `const char *`
    /// would be freed after the call. Swift emits string literals
    /// NUL-terminated in read-only data, so a `StaticString` pointer is safe.
    static func cString(_ string: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(string.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    // Fetched once: an implicit fetch on every operation walks the provider
    // store under a lock, which costs more than a whole SHA-256 of a JWT.
    // The objects are immutable and reference-counted, so sharing them
    // across threads is what OpenSSL documents as safe.
    nonisolated(unsafe) static let sha1 = fetchDigest("SHA1")
    nonisolated(unsafe) static let sha256 = fetchDigest("SHA256")
    nonisolated(unsafe) static let sha384 = fetchDigest("SHA384")
    nonisolated(unsafe) static let sha512 = fetchDigest("SHA512")
    nonisolated(unsafe) static let hmac: OpaquePointer = {
        guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else {
            fatalError("OpenSSL default provider has no HMAC: \(failure(.operationFailed, "EVP_MAC_fetch"))")
        }
        return mac
    }()
    nonisolated(unsafe) static let aes256CTR: OpaquePointer = {
        guard let cipher = EVP_CIPHER_fetch(nil, "AES-256-CTR", nil) else {
            fatalError("OpenSSL default provider has no AES-256-CTR: \(failure(.operationFailed, "EVP_CIPHER_fetch"))")
        }
        return cipher
    }()

    nonisolated(unsafe) static let aes256GCM: OpaquePointer = {
        guard let cipher = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) else {
            fatalError("OpenSSL default provider has no AES-256-GCM: \(failure(.operationFailed, "EVP_CIPHER_fetch"))")
        }
        return cipher
    }()

    private static func fetchDigest(_ name: String) -> OpaquePointer {
        guard let md = EVP_MD_fetch(nil, name, nil) else {
            fatalError("OpenSSL default provider has no \(name): \(failure(.operationFailed, "EVP_MD_fetch"))")
        }
        return md
    }

    /// Runs `body` with a pointer to `bytes`, or to a placeholder byte when `bytes` is empty.
    ///
    /// An empty Swift buffer may have a NULL base address, which some
    /// providers treat as "no input given" rather than "zero-length input".
    static func withBytePointer<R>(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafePointer<UInt8>) throws -> R) rethrows -> R {
        if let base = bytes.baseAddress {
            return try body(base.assumingMemoryBound(to: UInt8.self))
        }
        var placeholder: UInt8 = 0
        return try withUnsafePointer(to: &placeholder) { try body($0) }
    }

    // MARK: Reading key parameters

    /// A big-endian integer parameter of `pkey`, left-padded to `width` bytes when given.
    static func integer(_ pkey: OpaquePointer, _ name: StaticString, width: Int? = nil) throws -> [UInt8] {
        var bignum: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pkey, cString(name), &bignum) == 1, let bignum else {
            throw failure(.invalidKey, "EVP_PKEY_get_bn_param(\(name))")
        }
        defer { BN_clear_free(bignum) }
        let natural = (Int(BN_num_bits(bignum)) + 7) / 8
        let count = max(width ?? natural, natural, 1)
        var bytes = [UInt8](repeating: 0, count: count)
        guard BN_bn2binpad(bignum, &bytes, Int32(count)) == Int32(count) else {
            throw failure(.operationFailed, "BN_bn2binpad")
        }
        return bytes
    }

    /// An octet-string parameter of `pkey` (for example a raw Ed25519 key).
    static func octets(_ pkey: OpaquePointer, _ name: StaticString, maximumCount: Int = 256) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: maximumCount)
        var length = 0
        guard EVP_PKEY_get_octet_string_param(pkey, cString(name), &bytes, bytes.count, &length) == 1 else {
            throw failure(.invalidKey, "EVP_PKEY_get_octet_string_param(\(name))")
        }
        return Array(bytes[..<length])
    }

    /// A UTF-8 string parameter of `pkey` (for example the EC group name), or nil.
    static func text(_ pkey: OpaquePointer, _ name: StaticString) -> String? {
        var buffer = [CChar](repeating: 0, count: 80)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(pkey, cString(name), &buffer, buffer.count, &length) == 1 else {
            clearErrors()
            return nil
        }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    // MARK: Memory BIOs

    /// Runs `write` against a memory BIO and returns what it wrote.
    static func writtenText(_ operation: String, _ write: (OpaquePointer) -> Int32) throws -> [UInt8] {
        guard let bio = BIO_new(BIO_s_mem()) else { throw failure(.operationFailed, "BIO_new") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw failure(.operationFailed, operation) }
        var data: UnsafeMutablePointer<CChar>?
        let length = COpenSSL_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { throw failure(.operationFailed, "BIO_get_mem_data") }
        return Array(UnsafeRawBufferPointer(start: data, count: length))
    }

    /// Runs `read` against a read-only memory BIO over `bytes`.
    static func read<R>(_ bytes: [UInt8], _ read: (OpaquePointer) -> R?) -> R? {
        bytes.withUnsafeBytes { raw -> R? in
            guard raw.count < Int32.max, let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return read(bio)
        }
    }
}

/// Collects key parameters and turns them into an `EVP_PKEY` with `EVP_PKEY_fromdata`.
///
/// `OSSL_PARAM_BLD` stores the pointers it is given and reads them only in
/// `OSSL_PARAM_BLD_to_param`, so every BIGNUM and byte buffer is owned here
/// until the key exists. Secret material is wiped when the builder goes away.
final class KeyParameterBuilder {
    private let builder: OpaquePointer
    private var bignums: [OpaquePointer] = []
    private var buffers: [UnsafeMutableRawBufferPointer] = []

    init() throws {
        guard let builder = OSSL_PARAM_BLD_new() else { throw OpenSSL.failure(.operationFailed, "OSSL_PARAM_BLD_new") }
        self.builder = builder
    }

    deinit {
        OSSL_PARAM_BLD_free(builder)
        for bignum in bignums { BN_clear_free(bignum) }
        for buffer in buffers {
            OPENSSL_cleanse(buffer.baseAddress, buffer.count)
            buffer.deallocate()
        }
    }

    /// Adds a big-endian unsigned integer parameter.
    func push(_ key: StaticString, integer bytes: [UInt8]) throws {
        guard !bytes.isEmpty, bytes.count < Int32.max,
              let bignum = BN_bin2bn(bytes, Int32(bytes.count), nil) else {
            throw OpenSSL.failure(.invalidKey, "BN_bin2bn(\(key))")
        }
        bignums.append(bignum)
        guard OSSL_PARAM_BLD_push_BN(builder, OpenSSL.cString(key), bignum) == 1 else {
            throw OpenSSL.failure(.invalidKey, "OSSL_PARAM_BLD_push_BN(\(key))")
        }
    }

    /// Adds an octet-string parameter (copied into a buffer owned by the builder).
    func push(_ key: StaticString, octets bytes: [UInt8]) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
        buffers.append(buffer)
        buffer.copyBytes(from: bytes)
        guard OSSL_PARAM_BLD_push_octet_string(builder, OpenSSL.cString(key), buffer.baseAddress, bytes.count) == 1 else {
            throw OpenSSL.failure(.invalidKey, "OSSL_PARAM_BLD_push_octet_string(\(key))")
        }
    }

    /// Adds a UTF-8 string parameter whose storage is static.
    func push(_ key: StaticString, text value: StaticString) throws {
        let pointer = UnsafeMutablePointer(mutating: OpenSSL.cString(value))
        guard OSSL_PARAM_BLD_push_utf8_string(builder, OpenSSL.cString(key), pointer, 0) == 1 else {
            throw OpenSSL.failure(.invalidKey, "OSSL_PARAM_BLD_push_utf8_string(\(key))")
        }
    }

    /// Builds an `EVP_PKEY` of `type` (`"RSA"`, `"EC"`, `"ED25519"`) from the pushed parameters.
    func makeKey(type: StaticString, isPrivate: Bool) throws -> OpaquePointer {
        guard let params = OSSL_PARAM_BLD_to_param(builder) else {
            throw OpenSSL.failure(.invalidKey, "OSSL_PARAM_BLD_to_param")
        }
        defer { OSSL_PARAM_free(params) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, OpenSSL.cString(type), nil) else {
            throw OpenSSL.failure(.operationFailed, "EVP_PKEY_CTX_new_from_name")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var pkey: OpaquePointer?
        let selection = isPrivate ? COpenSSL_EVP_PKEY_KEYPAIR : COpenSSL_EVP_PKEY_PUBLIC_KEY
        guard EVP_PKEY_fromdata_init(context) == 1,
              EVP_PKEY_fromdata(context, &pkey, selection, params) == 1, let pkey else {
            throw OpenSSL.failure(.invalidKey, "EVP_PKEY_fromdata(\(type))")
        }
        return pkey
    }
}
