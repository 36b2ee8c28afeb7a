import CMalloc
import Foundation
import TetherCrypto
import TetherHTTP

// `tether COMMAND [OPTIONS]`: every failure is one line on standard error and a
// non-zero exit status (2 for a usage mistake).

let arguments = Array(CommandLine.arguments.dropFirst())
// A reader that went away (a closed pipe) fails a write instead of ending the process, so a secret shown once
// that nobody got can still be taken back (`Commands.requireShown`) and the failure reported.
signal(SIGPIPE, SIG_IGN)

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data("tether: \(message)\n".utf8))
    exit(status)
}

guard let command = arguments.first else {
    // A call without a command is a usage mistake: the overview goes where mistakes go.
    FileHandle.standardError.write(Data((Help.overview + "\n").utf8))
    exit(2)
}
if ["--help", "-h", "help"].contains(command) {
    if let topic = arguments.dropFirst().first, !["--help", "-h", "help"].contains(topic) {
        guard let text = Help.text(for: topic) else { fail("no such command \"\(topic)\" (see tether --help)", status: 2) }
        print(text)
    } else {
        print(Help.overview)
    }
    exit(0)
}
// Every connection and pooled database connection is a descriptor: lift the soft limit first.
_ = HTTPServer.raiseOpenFileLimit()
// As many malloc arenas as cores, not eight per core. A server's large blocks are always mapped apart, so
// its resident set stays near the live heap; a replay's (`migrate` runs the rebuilds migrations ask for),
// allocated and freed page after page, are kept.
Malloc.limitArenas()
if command == "replay" || command == "migrate" {
    Malloc.keepFreedBlocks()
} else {
    Malloc.fixMappingThreshold()
}
let rest = Array(arguments.dropFirst())
if rest.contains("--help") || rest.contains("-h") {
    guard let text = Help.text(for: command) else { fail("unknown command \"\(command)\" (see tether --help)", status: 2) }
    print(text)
    exit(0)
}

do {
    switch command {
    case "serve": try await Commands.serve(rest)
    case "dev": try await Commands.dev(rest)
    case "migrate": try await Commands.migrate(rest)
    case "replay": try await Commands.replay(rest)
    case "postgres": try await Commands.postgres(rest)
    case "history": try await Commands.history(rest)
    case "admin-keys": try await Commands.adminKeys(rest)
    case "webhooks": try await Commands.webhooks(rest)
    case "export": try await Commands.export(rest)
    case "keys": try await Commands.keys(rest)
    case "sweep": try await Commands.sweep(rest)
    case "firebase": try await Commands.firebase(rest)
    case "--version", "version": print("tether 0.1.0")
    default: fail("unknown command \"\(command)\" (see tether --help)", status: 2)
    }
} catch let error as UsageError {
    fail("\(error.description) (see tether \(command) --help)", status: 2)
} catch let error as CommandFailure {
    fail(error.description, status: error.status)
} catch {
    fail(Commands.sentence(error), status: 1)
}
// An answer that never reached its reader (a full disk, a closed pipe) is a failure, not a success: a new
// key or secret shown once, or an export, that went nowhere must not exit 0.
if let failure = Commands.standardOutputFailure() {
    fail(failure, status: 1)
}
