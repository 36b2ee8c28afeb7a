// swift-tools-version:6.1
import PackageDescription

// Tether has no SwiftPM dependencies: these machines cannot fetch any. C libraries
// come from Debian packages through system library targets.
let package = Package(
    name: "Tether",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "tether", targets: ["tether"]),
    ],
    dependencies: [],
    targets: [
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CLibCrypt", pkgConfig: "libcrypt", providers: [.apt(["libcrypt-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CMalloc"),

        .target(name: "TetherCore"),
        .target(name: "TetherCrypto", dependencies: ["COpenSSL", "CLibCrypt"]),
        .target(name: "TetherJOSE", dependencies: ["CCurl", "TetherCore", "TetherCrypto"]),
        .target(name: "TetherPostgres", dependencies: ["CLibPQ", "TetherCore", "TetherCrypto", "TetherJOSE"]),
        .target(name: "TetherHTTP", dependencies: ["CMicroHTTPD", "CMalloc", "TetherCore"]),
        .target(name: "TetherProviders", dependencies: ["TetherCore", "TetherCrypto", "TetherJOSE"]),
        .target(name: "TetherAPI", dependencies: ["TetherCore", "TetherCrypto", "TetherJOSE", "TetherPostgres", "TetherHTTP", "TetherProviders"]),
        .executableTarget(name: "tether", dependencies: ["CMalloc", "TetherAPI", "TetherProviders", "TetherHTTP", "TetherPostgres"]),
        .executableTarget(name: "tether-bench", dependencies: ["TetherCrypto", "TetherJOSE"]),
        .target(name: "TetherTesting", dependencies: ["TetherPostgres", "TetherJOSE"]),

        .testTarget(name: "TetherCoreTests", dependencies: ["TetherCore"]),
        .testTarget(name: "TetherCryptoTests", dependencies: ["TetherCrypto"]),
        .testTarget(name: "TetherJOSETests", dependencies: ["TetherJOSE", "TetherCrypto", "TetherHTTP", "TetherTesting"]),
        .testTarget(name: "TetherPostgresTests", dependencies: ["TetherPostgres", "TetherTesting"]),
        .testTarget(name: "TetherHTTPTests", dependencies: ["TetherHTTP", "TetherTesting"]),
        .testTarget(name: "TetherProvidersTests", dependencies: ["TetherProviders", "TetherPostgres", "TetherTesting", "TetherAPI", "TetherHTTP"]),
        .testTarget(name: "TetherAPITests", dependencies: ["TetherAPI", "TetherTesting"]),
    ],
    swiftLanguageModes: [.v6]
)
